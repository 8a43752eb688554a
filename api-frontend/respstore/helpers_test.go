package respstore

import (
	"os"
	"testing"
)

func getenv(k string) string { return os.Getenv(k) }

func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
