//go:build !amd64 || purego

package peak

func fmaZLoop(n int) { panic("unreachable") }

func cvtZLoop(n int)     { panic("unreachable") }
func bf16ZLoop(n int)    { panic("unreachable") }
func fmaCvtZLoop(n int)  { panic("unreachable") }
func fmaBF16ZLoop(n int) { panic("unreachable") }
