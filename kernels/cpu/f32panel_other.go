//go:build !amd64 || purego

package cpu

func panel6AVX2(x *float32, xs int, p *float32, ps int, k int, out *float32, os int) {
	panic("unreachable")
}
func panel4AVX2(x *float32, xs int, p *float32, ps int, k int, out *float32, os int) {
	panic("unreachable")
}
func panel2AVX2(x *float32, xs int, p *float32, ps int, k int, out *float32, os int) {
	panic("unreachable")
}
func panel1AVX2(x *float32, xs int, p *float32, ps int, k int, out *float32, os int) {
	panic("unreachable")
}
