// The frontend's socket pump: a C thread that owns an EngineConn's DEALER
// (and its monitor) and trades messages with Go through two rings in C
// memory, so that Go makes no cgo call to receive a batch. See cpump.go.

#ifndef SLUICE_CPUMP_H
#define SLUICE_CPUMP_H

#include <stdint.h>
#include <pthread.h>
#include <zmq.h>

// Slots in the C → Go ring (a power of two).
#define SL_SLOTS 1024

// What a C → Go slot holds.
enum {
	SL_FRAME = 0,        // a message from the engine: data, size
	SL_DISCONNECTED = 1, // the monitor saw the connection drop
	SL_SENDFAIL = 2,     // a send that asked for it failed: err is errno
};

// Out-ring record flags.
enum {
	SL_OUT_REPORT = 1,  // report a failed send (SL_SENDFAIL)
	SL_OUT_POINTER = 2, // the payload is {void *data; uint64 len}, malloc'd: free it after sending
};

// The out-ring marker that says "the next record starts at offset 0".
#define SL_OUT_WRAP 0xFFFFFFFFu

typedef struct {
	zmq_msg_t msg;    // C only
	const void *data; // SL_FRAME: the message bytes, valid until Go releases the slot
	uint64_t size;
	uint32_t kind;
	int32_t err;
} sl_slot;

// sl_pump is shared by the C thread and Go. Counters only grow; a ring's
// used part is head - tail. Go reads and writes the shared fields with
// sync/atomic, C with __atomic builtins (sequentially consistent where a
// flag and a counter must be seen in order: in_full, out_sleeping).
typedef struct {
	// C → Go: C fills slots [in_tail, in_head), Go consumes them.
	uint64_t in_head; // C
	uint64_t in_tail; // Go
	uint32_t in_full; // C sets it before waiting for Go to free slots
	uint32_t stop;    // Go sets it to end the thread
	// Go → C: Go appends records [u32 len][u32 flags][payload, padded to 8].
	uint64_t out_head; // Go
	uint64_t out_tail; // C
	uint64_t out_cap;
	uint8_t *out;
	int wake_r, wake_w;     // Go writes wake_w to wake the thread
	int notify_r, notify_w; // the thread writes notify_w when it filled slots
	void *ctx, *dealer, *monitor;
	pthread_t thread;
	int started;
	uint64_t in_freed;    // C only: slots below it are closed
	uint32_t pending_disc; // C only: disconnects waiting for a free slot
	sl_slot in[SL_SLOTS];
} sl_pump;

typedef struct {
	const char *addr;
	const char *identity;
	int identity_len;
	const char *monitor_addr; // NULL: no monitor
	const char *curve_server, *curve_public, *curve_secret; // Z85 (40 chars) or NULL
	uint64_t out_cap;
} sl_config;

// sl_pump_new creates the context and sockets, connects, and starts the
// thread. On failure it returns NULL with a message in err.
sl_pump *sl_pump_new(const sl_config *cfg, char *err, int errlen);

// sl_pump_free stops the thread (the stop flag must be set and the thread
// woken, or it is done here), closes the sockets and the context and frees
// everything, including notify_r: Go only borrows it (a dup).
void sl_pump_free(sl_pump *p);

// sl_malloc_copy copies n bytes into C memory (for SL_OUT_POINTER records).
void *sl_malloc_copy(const void *src, uint64_t n);

#endif
