// Package reliability holds black-box tests of Sluice's reliability and
// security promises against the real engine-core and api-frontend binaries:
// fault injection (SIGKILL, SIGSTOP, a removed socket, a restarted engine
// serving another model), disconnect storms, exactly-once token delivery at
// several stream intervals, hostile HTTP and ZeroMQ input, API-key auth and
// file permissions, and a soak run. docs/RELIABILITY.md lists each promise,
// the test that proves it and the last measured figures.
//
// The package has no code outside its tests. The short suite runs with
// `go test ./internal/reliability`; the long soak needs
// SLUICE_RELIABILITY_LONG=1 (`go tool task reliability`).
package reliability
