// The frontend's socket pump (see cpump.h and cpump.go).

#include "cpump.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define LOAD_SC(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define STORE_SC(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

static int sl_pipe(int fds[2]) {
	if (pipe(fds) != 0) {
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		fcntl(fds[i], F_SETFD, FD_CLOEXEC);
		fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
	}
	return 0;
}

static void sl_drain_fd(int fd) {
	char buf[64];
	while (read(fd, buf, sizeof buf) > 0) {
	}
}

static void sl_poke(int fd) {
	char b = 1;
	// EAGAIN: the pipe is full, so the reader wakes anyway.
	while (write(fd, &b, 1) < 0 && errno == EINTR) {
	}
}

// sl_close_slots closes the slots below upto.
static void sl_close_slots(sl_pump *p, uint64_t upto) {
	while (p->in_freed < upto) {
		sl_slot *s = &p->in[p->in_freed & (SL_SLOTS - 1)];
		if (s->kind == SL_FRAME) {
			zmq_msg_close(&s->msg);
		}
		p->in_freed++;
	}
}

// sl_free_consumed closes the slots Go has released.
static void sl_free_consumed(sl_pump *p) { sl_close_slots(p, LOAD_SC(&p->in_tail)); }

// sl_slot_free reports whether the C → Go ring has a free (closed) slot;
// when it has none it sets in_full (Go then wakes the thread as it releases
// slots).
static int sl_slot_free(sl_pump *p) {
	if (p->in_head - p->in_freed < SL_SLOTS) {
		return 1;
	}
	sl_free_consumed(p);
	if (p->in_head - p->in_freed < SL_SLOTS) {
		return 1;
	}
	STORE_SC(&p->in_full, 1);
	sl_free_consumed(p); // Go may have released one meanwhile
	if (p->in_head - p->in_freed < SL_SLOTS) {
		STORE_SC(&p->in_full, 0);
		return 1;
	}
	return 0;
}

static void sl_push_event(sl_pump *p, uint32_t kind, int32_t err) {
	sl_slot *s = &p->in[p->in_head & (SL_SLOTS - 1)];
	s->kind = kind;
	s->err = err;
	s->data = NULL;
	s->size = 0;
	STORE_REL(&p->in_head, p->in_head + 1);
}

// sl_rec is one Go → C record.
typedef struct {
	const void *data;
	uint64_t size;
	uint32_t flags;
	void *owned; // SL_OUT_POINTER: data, malloc'd
} sl_rec;

// sl_out_next reads the record at *tail (after a wrap marker, if that is
// what is there: Go publishes the marker and the record together) and moves
// *tail past it. The caller checked *tail != out_head.
static void sl_out_next(sl_pump *p, uint64_t *tail, sl_rec *r) {
	uint64_t pos = *tail % p->out_cap;
	uint32_t len;
	memcpy(&len, p->out + pos, 4);
	if (len == SL_OUT_WRAP) {
		*tail += p->out_cap - pos;
		pos = 0;
		memcpy(&len, p->out, 4);
	}
	memcpy(&r->flags, p->out + pos + 4, 4);
	r->data = p->out + pos + 8;
	r->size = len;
	r->owned = NULL;
	if (r->flags & SL_OUT_POINTER) {
		memcpy(&r->owned, p->out + pos + 8, sizeof r->owned);
		memcpy(&r->size, p->out + pos + 16, 8);
		r->data = r->owned;
	}
	*tail += 8 + ((len + 7) & ~(uint64_t)7);
}

// sl_drain_out sends every record Go queued; returns how many it sent.
static int sl_drain_out(sl_pump *p, int *pushed) {
	int n = 0;
	uint64_t head = LOAD_ACQ(&p->out_head);
	uint64_t tail = p->out_tail;
	while (tail != head) {
		sl_rec r;
		sl_out_next(p, &tail, &r);
		int rc;
		do {
			rc = zmq_send(p->dealer, r.data, r.size, ZMQ_DONTWAIT);
		} while (rc < 0 && errno == EINTR);
		int err = rc < 0 ? errno : 0;
		free(r.owned);
		STORE_REL(&p->out_tail, tail);
		n++;
		if (err != 0 && (r.flags & SL_OUT_REPORT) && sl_slot_free(p)) {
			sl_push_event(p, SL_SENDFAIL, err);
			(*pushed)++;
		}
		head = LOAD_ACQ(&p->out_head);
	}
	return n;
}

// sl_drain_monitor reads the monitor's events; returns how many.
static int sl_drain_monitor(sl_pump *p) {
	if (p->monitor == NULL) {
		return 0;
	}
	int n = 0;
	for (;;) {
		zmq_msg_t ev;
		zmq_msg_init(&ev);
		if (zmq_msg_recv(&ev, p->monitor, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&ev);
			break;
		}
		uint16_t id = 0;
		if (zmq_msg_size(&ev) >= 2) {
			memcpy(&id, zmq_msg_data(&ev), 2);
		}
		int more = zmq_msg_more(&ev);
		zmq_msg_close(&ev);
		while (more) { // the event's address frame
			zmq_msg_t part;
			zmq_msg_init(&part);
			if (zmq_msg_recv(&part, p->monitor, 0) < 0) {
				zmq_msg_close(&part);
				break;
			}
			more = zmq_msg_more(&part);
			zmq_msg_close(&part);
		}
		if (id & ZMQ_EVENT_DISCONNECTED) {
			p->pending_disc++;
		}
		n++;
	}
	return n;
}

// sl_drain_in moves the dealer's messages into free slots; returns how many.
static int sl_drain_in(sl_pump *p) {
	int n = 0;
	while (sl_slot_free(p)) {
		sl_slot *s = &p->in[p->in_head & (SL_SLOTS - 1)];
		zmq_msg_init(&s->msg);
		if (zmq_msg_recv(&s->msg, p->dealer, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&s->msg);
			break;
		}
		s->kind = SL_FRAME;
		s->err = 0;
		s->data = zmq_msg_data(&s->msg);
		s->size = zmq_msg_size(&s->msg);
		STORE_REL(&p->in_head, p->in_head + 1);
		n++;
	}
	return n;
}

static int sl_readable(void *sock) {
	int ev = 0;
	size_t len = sizeof ev;
	return sock != NULL && zmq_getsockopt(sock, ZMQ_EVENTS, &ev, &len) == 0 && (ev & ZMQ_POLLIN);
}

static void *sl_run(void *arg) {
	sl_pump *p = arg;
#ifdef __linux__
	prctl(PR_SET_NAME, "sluice-pump", 0, 0, 0); // a name for /proc, top and perf
#endif
	int zfd = -1, mfd = -1;
	size_t len = sizeof zfd;
	zmq_getsockopt(p->dealer, ZMQ_FD, &zfd, &len);
	if (p->monitor != NULL) {
		len = sizeof mfd;
		zmq_getsockopt(p->monitor, ZMQ_FD, &mfd, &len);
	}
	while (!LOAD_ACQ(&p->stop)) {
		int pushed = 0;
		sl_free_consumed(p);
		int busy = sl_drain_out(p, &pushed);
		busy += sl_drain_monitor(p);
		while (p->pending_disc > 0 && sl_slot_free(p)) {
			sl_push_event(p, SL_DISCONNECTED, 0);
			p->pending_disc--;
			pushed++;
		}
		int got = sl_drain_in(p);
		pushed += got;
		busy += got;
		if (pushed > 0) {
			sl_poke(p->notify_w);
		}
		// ZMQ_FD is edge-triggered and any zmq call on a socket may consume
		// its edge: sleep only after a pass that found nothing, with a last
		// look at ZMQ_EVENTS.
		int full = LOAD_SC(&p->in_full);
		if (busy > 0 || (!full && sl_readable(p->dealer)) || sl_readable(p->monitor) ||
		    LOAD_ACQ(&p->out_head) != p->out_tail) {
			continue;
		}
		struct pollfd fds[3];
		int nfds = 0;
		fds[nfds++] = (struct pollfd){.fd = p->wake_r, .events = POLLIN};
		if (!full) { // with no free slot, wait for Go to release one
			fds[nfds++] = (struct pollfd){.fd = zfd, .events = POLLIN};
		}
		if (mfd >= 0) {
			fds[nfds++] = (struct pollfd){.fd = mfd, .events = POLLIN};
		}
		if (LOAD_ACQ(&p->stop)) {
			break;
		}
		poll(fds, nfds, -1);
		sl_drain_fd(p->wake_r);
	}
	return NULL;
}

static int sl_setopt_int(void *sock, int opt, int v) { return zmq_setsockopt(sock, opt, &v, sizeof v); }

static void sl_close_all(sl_pump *p) {
	if (p->dealer != NULL) {
		zmq_close(p->dealer);
	}
	if (p->monitor != NULL) {
		zmq_close(p->monitor);
	}
	if (p->ctx != NULL) {
		zmq_ctx_term(p->ctx);
	}
	int fds[4] = {p->wake_r, p->wake_w, p->notify_r, p->notify_w};
	for (int i = 0; i < 4; i++) {
		if (fds[i] >= 0) {
			close(fds[i]);
		}
	}
	free(p->out);
	free(p);
}

sl_pump *sl_pump_new(const sl_config *cfg, char *err, int errlen) {
	sl_pump *p = calloc(1, sizeof *p);
	if (p == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->wake_r = p->wake_w = p->notify_r = p->notify_w = -1;
	p->out_cap = cfg->out_cap;
	p->out = malloc(cfg->out_cap);
	int wake[2], notify[2];
	if (p->out == NULL || sl_pipe(wake) != 0) {
		snprintf(err, errlen, "pump ring or pipe: %s", strerror(errno));
		sl_close_all(p);
		return NULL;
	}
	p->wake_r = wake[0];
	p->wake_w = wake[1];
	if (sl_pipe(notify) != 0) {
		snprintf(err, errlen, "pump pipe: %s", strerror(errno));
		sl_close_all(p);
		return NULL;
	}
	p->notify_r = notify[0];
	p->notify_w = notify[1];
	const char *what = "zmq context";
	if ((p->ctx = zmq_ctx_new()) == NULL) {
		goto fail;
	}
	what = "dealer socket";
	if ((p->dealer = zmq_socket(p->ctx, ZMQ_DEALER)) == NULL) {
		goto fail;
	}
	what = "dealer options";
	if (zmq_setsockopt(p->dealer, ZMQ_ROUTING_ID, cfg->identity, cfg->identity_len) != 0 ||
	    sl_setopt_int(p->dealer, ZMQ_SNDHWM, 0) != 0 || sl_setopt_int(p->dealer, ZMQ_RCVHWM, 0) != 0 ||
	    sl_setopt_int(p->dealer, ZMQ_LINGER, 0) != 0 || sl_setopt_int(p->dealer, ZMQ_IMMEDIATE, 1) != 0 ||
	    sl_setopt_int(p->dealer, ZMQ_RECONNECT_IVL, 100) != 0 ||
	    sl_setopt_int(p->dealer, ZMQ_RECONNECT_IVL_MAX, 1000) != 0) {
		goto fail;
	}
	if (cfg->curve_server != NULL) {
		what = "curve server key";
		if (zmq_setsockopt(p->dealer, ZMQ_CURVE_SERVERKEY, cfg->curve_server, strlen(cfg->curve_server)) != 0) {
			goto fail;
		}
		what = "curve public key";
		if (zmq_setsockopt(p->dealer, ZMQ_CURVE_PUBLICKEY, cfg->curve_public, strlen(cfg->curve_public)) != 0) {
			goto fail;
		}
		what = "curve secret key";
		if (zmq_setsockopt(p->dealer, ZMQ_CURVE_SECRETKEY, cfg->curve_secret, strlen(cfg->curve_secret)) != 0) {
			goto fail;
		}
	}
	what = "connect";
	if (zmq_connect(p->dealer, cfg->addr) != 0) {
		goto fail;
	}
	// A monitor reports a dropped connection at once; without one the
	// liveness timeout still notices (as before, a failure here is not fatal).
	if (cfg->monitor_addr != NULL && zmq_socket_monitor(p->dealer, cfg->monitor_addr, ZMQ_EVENT_DISCONNECTED) == 0) {
		p->monitor = zmq_socket(p->ctx, ZMQ_PAIR);
		if (p->monitor != NULL && zmq_connect(p->monitor, cfg->monitor_addr) != 0) {
			zmq_close(p->monitor);
			p->monitor = NULL;
		}
	}
	// The thread takes no signals: they go to the Go runtime's threads.
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&p->thread, NULL, sl_run, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		snprintf(err, errlen, "start pump thread: %s", strerror(rc));
		sl_close_all(p);
		return NULL;
	}
	p->started = 1;
	return p;
fail:
	snprintf(err, errlen, "%s: %s", what, zmq_strerror(zmq_errno()));
	sl_close_all(p);
	return NULL;
}

void sl_pump_free(sl_pump *p) {
	if (p->started) {
		STORE_SC(&p->stop, 1);
		sl_poke(p->wake_w);
		pthread_join(p->thread, NULL);
	}
	// Close what Go never released, then what it did.
	sl_close_slots(p, p->in_head);
	// Pointer records Go queued but the thread never sent.
	uint64_t tail = p->out_tail;
	while (tail != p->out_head) {
		sl_rec r;
		sl_out_next(p, &tail, &r);
		free(r.owned);
	}
	sl_close_all(p);
}

void *sl_malloc_copy(const void *src, uint64_t n) {
	void *d = malloc(n > 0 ? n : 1);
	if (d != NULL && n > 0) {
		memcpy(d, src, n);
	}
	return d;
}
