//go:build !amd64 || purego

package peak

func maddLoop(n int)     { panic("unreachable") }
func fmaLoop(n int)      { panic("unreachable") }
func maddOnlyLoop(n int) { panic("unreachable") }
func chainLoop(n int)    { panic("unreachable") }
func ktLoop(n int)       { panic("unreachable") }

const available = false
