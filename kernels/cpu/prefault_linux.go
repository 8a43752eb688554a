package cpu

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// prefault maps the pages wholly inside b, fresh anonymous memory about to
// be written, with one madvise(MADV_POPULATE_WRITE) (Linux 5.14+) instead
// of one page fault per 4 KiB page on the first writes. Advisory: where
// the call fails, the writes fault the pages in as before.
func prefault(b []byte) {
	if len(b) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&b[0]))
	lo := (start + page - 1) &^ (page - 1)
	hi := (start + uintptr(len(b))) &^ (page - 1)
	if hi <= lo {
		return
	}
	off := int(lo - start)
	_ = unix.Madvise(b[off:off+int(hi-lo)], unix.MADV_POPULATE_WRITE)
}
