package zmqtransport

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/ipc"
)

func TestCurve(t *testing.T) {
	srvPub, srvSec, err := NewKeyPair()
	if err != nil {
		t.Skipf("SKIP: libzmq without CURVE: %v", err)
	}
	cliPub, cliSec, _ := NewKeyPair()
	otherPub, otherSec, _ := NewKeyPair()
	addr := fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	s, err := Listen(EngineConfig{Addr: addr, Ready: ipc.Ready{EngineID: "e", ModelName: "m"},
		Curve: &CurveServer{SecretKey: srvSec, AllowedClients: []string{cliPub}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close("test over")

	good, err := Dial(ClientConfig{Addr: addr, FrontendID: "good", Curve: &CurveClient{ServerKey: srvPub, SecretKey: cliSec}})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	waitUp(t, good)

	cases := map[string]ClientConfig{
		"plaintext":       {Addr: addr, FrontendID: "plain"},
		"unknown client":  {Addr: addr, FrontendID: "other", Curve: &CurveClient{ServerKey: srvPub, PublicKey: otherPub, SecretKey: otherSec}},
		"wrong serverkey": {Addr: addr, FrontendID: "wrongsrv", Curve: &CurveClient{ServerKey: otherPub, SecretKey: cliSec}},
	}
	for name, cfg := range cases {
		c, err := Dial(cfg)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(600 * time.Millisecond)
		if _, ok := c.Ready(); ok {
			t.Errorf("%s: connected to a CURVE engine", name)
		}
		c.Close()
	}
}

func TestReadKeyFile(t *testing.T) {
	pub, sec, err := NewKeyPair()
	if err != nil {
		t.Skipf("SKIP: libzmq without CURVE: %v", err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "k")
	os.WriteFile(p, []byte("# engine secret\n"+sec+"\n"), 0o600)
	if got, err := ReadKeyFile(p); err != nil || got != sec {
		t.Fatalf("got %q %v", got, err)
	}
	os.WriteFile(p, []byte(pub+"\n\n"+sec+"\n"), 0o600)
	if keys, err := ReadKeyList(p); err != nil || len(keys) != 2 {
		t.Fatalf("list %v %v", keys, err)
	}
	os.WriteFile(p, []byte("short\n"), 0o600)
	if _, err := ReadKeyFile(p); err == nil {
		t.Fatal("short key accepted")
	}
}
