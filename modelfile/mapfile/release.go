package mapfile

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// Release drops the pages that lie wholly inside data, a part of a
// mapping made by Map, from this process's resident set (madvise
// MADV_DONTNEED): a loader that has copied a tensor into another layout
// calls it so that the file's bytes and the copy are not both resident.
// The bytes stay readable: a later read maps them again from the page
// cache. data must not be memory that Map did not return (anonymous
// memory would read back as zeros).
func Release(data []byte) error {
	ps := uintptr(os.Getpagesize())
	if len(data) == 0 {
		return nil
	}
	p := uintptr(unsafe.Pointer(&data[0]))
	lo := (p + ps - 1) &^ (ps - 1)
	hi := (p + uintptr(len(data))) &^ (ps - 1)
	if hi <= lo {
		return nil
	}
	whole := data[lo-p : hi-p]
	if err := syscall.Madvise(whole, syscall.MADV_DONTNEED); err != nil {
		return fmt.Errorf("madvise: %w", err)
	}
	return nil
}
