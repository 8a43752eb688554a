package zmqtransport

import (
	"fmt"
	"os"
	"strings"

	zmq "github.com/pebbe/zmq4"
	"go.uber.org/zap"
)

// CurveServer turns on CURVE encryption (and optionally client
// authentication) for an engine's tcp:// socket.
type CurveServer struct {
	// SecretKey is the engine's Z85 secret key (40 characters).
	SecretKey string
	// AllowedClients lists the Z85 public keys of the frontends allowed to
	// connect; empty allows any client that knows the engine's public key.
	AllowedClients []string
}

// CurveClient turns on CURVE for a frontend's connection.
type CurveClient struct {
	// ServerKey is the engine's Z85 public key.
	ServerKey string
	// PublicKey and SecretKey are the frontend's key pair; when empty an
	// ephemeral pair is generated (enough for encryption, not for an engine
	// that authenticates clients).
	PublicKey, SecretKey string
}

// ReadKeyFile reads a Z85 key from a file (the first non-empty line that is
// not a comment; surrounding whitespace ignored). Key files should be 0600.
func ReadKeyFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read key file %s: %w", path, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(line) != 40 {
			return "", fmt.Errorf("key file %s: want a 40-character Z85 key, got %d characters", path, len(line))
		}
		return line, nil
	}
	return "", fmt.Errorf("key file %s: no key", path)
}

// ReadKeyList reads one Z85 public key per line (comments and blank lines
// ignored).
func ReadKeyList(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key list %s: %w", path, err)
	}
	var keys []string
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(line) != 40 {
			return nil, fmt.Errorf("key list %s line %d: want a 40-character Z85 key", path, i+1)
		}
		keys = append(keys, line)
	}
	return keys, nil
}

// NewKeyPair returns a fresh Z85 (public, secret) CURVE key pair.
func NewKeyPair() (public, secret string, err error) {
	return zmq.NewCurveKeypair()
}

// applyCurveServer configures the ROUTER as a CURVE server and, with an
// allow list, starts a ZAP handler in the socket's own context (no global
// state: zmq4's Auth* functions live in the default context).
func applyCurveServer(ctx *zmq.Context, sock *zmq.Socket, c *CurveServer, log *zap.Logger, stop <-chan struct{}) error {
	if !zmq.HasCurve() {
		return fmt.Errorf("CURVE requested but libzmq was built without it")
	}
	if err := sock.SetCurveServer(1); err != nil {
		return fmt.Errorf("curve server: %w", err)
	}
	if err := sock.SetCurveSecretkey(c.SecretKey); err != nil {
		return fmt.Errorf("curve secret key: %w", err)
	}
	if len(c.AllowedClients) == 0 {
		return nil
	}
	allowed := map[string]bool{}
	for _, k := range c.AllowedClients {
		allowed[k] = true
	}
	rep, err := ctx.NewSocket(zmq.REP)
	if err != nil {
		return err
	}
	rep.SetLinger(0)
	if err := rep.Bind("inproc://zeromq.zap.01"); err != nil {
		rep.Close()
		return fmt.Errorf("zap handler: %w", err)
	}
	if err := sock.SetZapDomain("sluice"); err != nil {
		rep.Close()
		return err
	}
	go func() {
		defer rep.Close()
		// Waits in Go's network poller, not in a cgo zmq_poll (see
		// sockWaiter); the waiter is closed before the socket.
		w, err := newSockWaiter(rep)
		if err != nil {
			log.Warn("zmq socket wait falls back to polling every "+fallbackTick.String(), zap.String("socket", "zap handler"), zap.Error(err))
		}
		defer w.close()
		for {
			for readable(rep) {
				msg, err := rep.RecvMessage(zmq.DONTWAIT)
				if err != nil {
					break
				}
				if len(msg) < 6 {
					// A REP must answer before it can receive again.
					rep.SendMessage("1.0", "", "400", "malformed ZAP request", "", "")
					continue
				}
				// ZAP request (RFC 27): version, request id, domain,
				// address, identity, mechanism, credentials…; CURVE's
				// credential is the client's 32-byte public key.
				version, reqID, mechanism := msg[0], msg[1], msg[5]
				status, text := "400", "denied"
				if mechanism == "CURVE" && len(msg) >= 7 {
					if key := zmq.Z85encode(msg[6]); allowed[key] {
						status, text = "200", "OK"
					} else {
						log.Warn("CURVE client not in the allow list", zap.String("client_key", key), zap.String("address", msg[3]))
					}
				}
				rep.SendMessage(version, reqID, status, text, "", "")
			}
			select {
			case <-stop:
				return
			case <-w.C:
			}
		}
	}()
	return nil
}

// curveClientKeys returns the client's key pair: the configured one, its
// public half derived from the secret, or a fresh pair.
func curveClientKeys(c *CurveClient) (pub, sec string, err error) {
	if !zmq.HasCurve() {
		return "", "", fmt.Errorf("CURVE requested but libzmq was built without it")
	}
	pub, sec = c.PublicKey, c.SecretKey
	if sec == "" {
		if pub, sec, err = zmq.NewCurveKeypair(); err != nil {
			return "", "", err
		}
	} else if pub == "" {
		if pub, err = zmq.AuthCurvePublic(sec); err != nil {
			return "", "", fmt.Errorf("derive curve public key: %w", err)
		}
	}
	for _, k := range []struct{ name, key string }{{"server", c.ServerKey}, {"public", pub}, {"secret", sec}} {
		if len(k.key) != 40 {
			return "", "", fmt.Errorf("curve %s key: want 40 Z85 characters, got %d", k.name, len(k.key))
		}
	}
	return pub, sec, nil
}
