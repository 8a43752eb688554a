package ipc

// ConnEvent is a change of state of a frontend's connection to one engine,
// as the transport reports it: Up once the engine answered HELLO with
// READY, down (Up false, with a Reason) when the engine went silent, parked
// this frontend, shut down, restarted, or refused the HELLO. It is not a
// wire frame; it lives here so that the transport (ipc/zmqtransport) and the
// frontend's engine client (api-frontend/engineclient) share it without
// importing each other.
type ConnEvent struct {
	// Up is true once READY arrived, false when the engine went away.
	Up bool
	// Ready is the engine's READY facts; valid when Up.
	Ready Ready
	// Reason says why the engine went down; empty when Up.
	Reason string
}
