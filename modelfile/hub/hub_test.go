package hub

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

// fakeHub serves one repository like the Hub's API and resolve endpoints:
// resolve answers HEAD with a redirect carrying X-Linked-Etag, and the CDN
// honours Range requests. failOnce makes the first CDN download of the
// weights stop half way.
type fakeHub struct {
	files     map[string]string
	token     string
	failOnce  atomic.Bool
	ranges    atomic.Int32
	downloads atomic.Int32
}

func (f *fakeHub) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/models/org/model/revision/main", func(w http.ResponseWriter, r *http.Request) {
		if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
			http.Error(w, "gated", http.StatusUnauthorized)
			return
		}
		var sib []string
		for n := range f.files {
			sib = append(sib, fmt.Sprintf(`{"rfilename":%q}`, n))
		}
		sib = append(sib, `{"rfilename":"README.md"}`, `{"rfilename":"onnx/model.onnx"}`)
		fmt.Fprintf(w, `{"sha":%q,"siblings":[%s]}`, commit, strings.Join(sib, ","))
	})
	mux.HandleFunc("/org/model/resolve/"+commit+"/", func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/org/model/resolve/"+commit+"/")
		if _, ok := f.files[name]; !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Linked-Etag", `"etag-`+name+`"`)
		w.Header().Set("X-Repo-Commit", commit)
		http.Redirect(w, r, "/cdn/"+name, http.StatusFound)
	})
	mux.HandleFunc("/cdn/", func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/cdn/")
		body := f.files[name]
		w.Header().Set("ETag", `"cdn-other"`)
		start := 0
		if rg := r.Header.Get("Range"); rg != "" {
			f.ranges.Add(1)
			start, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(body)-1, len(body)))
			w.Header().Set("Content-Length", strconv.Itoa(len(body)-start))
			w.WriteHeader(http.StatusPartialContent)
		} else {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		if r.Method == http.MethodHead {
			return
		}
		f.downloads.Add(1)
		if name == "model.safetensors" && f.failOnce.CompareAndSwap(true, false) {
			w.Write([]byte(body[start : start+len(body)/2]))
			panic(http.ErrAbortHandler) // cut the connection mid-body
		}
		w.Write([]byte(body[start:]))
	})
	return mux
}

func TestDownloadResumeAndOffline(t *testing.T) {
	fh := &fakeHub{files: map[string]string{
		"config.json":       `{"hidden_size":8}`,
		"model.safetensors": strings.Repeat("0123456789", 1000),
		"tokenizer.json":    `{}`,
	}, token: "secret"}
	fh.failOnce.Store(true)
	srv := httptest.NewServer(fh.handler())
	defer srv.Close()
	cache := t.TempDir()
	o := Options{Endpoint: srv.URL, CacheDir: cache, Client: srv.Client()}

	if _, err := Download(context.Background(), "org/model", o); err == nil || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Fatalf("without token: want an access error naming HF_TOKEN, got %v", err)
	}
	o.Token = "secret"
	if _, err := Download(context.Background(), "org/model", o); err == nil {
		t.Fatal("first download should fail half way")
	}
	snap, err := Download(context.Background(), "org/model", o)
	if err != nil {
		t.Fatal(err)
	}
	if fh.ranges.Load() == 0 {
		t.Error("the second attempt did not resume with a Range request")
	}
	want := filepath.Join(cache, "models--org--model", "snapshots", commit)
	if snap != want {
		t.Errorf("snapshot %s, want %s", snap, want)
	}
	for name, body := range fh.files {
		b, err := os.ReadFile(filepath.Join(snap, name))
		if err != nil || string(b) != body {
			t.Errorf("%s: %d bytes, %v", name, len(b), err)
		}
		target, _ := os.Readlink(filepath.Join(snap, name))
		if target != filepath.Join("..", "..", "blobs", "etag-"+name) {
			t.Errorf("%s links to %s", name, target)
		}
	}
	if _, err := os.Stat(filepath.Join(snap, "README.md")); err == nil {
		t.Error("README.md should not be downloaded")
	}
	if ref, _ := os.ReadFile(filepath.Join(cache, "models--org--model", "refs", "main")); string(ref) != commit {
		t.Errorf("refs/main = %q", ref)
	}

	// a second call downloads nothing
	before := fh.downloads.Load()
	if _, err := Download(context.Background(), "org/model", o); err != nil || fh.downloads.Load() != before {
		t.Errorf("cached call downloaded again (%v)", err)
	}
	// offline: served from the cache with no server at all
	srv.Close()
	off := Options{CacheDir: cache, Offline: true}
	if got, err := Download(context.Background(), "org/model", off); err != nil || got != snap {
		t.Errorf("offline: %s %v", got, err)
	}
	if _, err := Download(context.Background(), "org/other", off); err == nil {
		t.Error("offline, not cached: want error")
	}
}

func TestIsRepoID(t *testing.T) {
	for s, want := range map[string]bool{"meta-llama/Llama-3.2-1B": true, "demo": false, "a/b/c": false, "../x": false, "/abs/path": false, "org/..": false} {
		if IsRepoID(s) != want {
			t.Errorf("IsRepoID(%q) = %v", s, !want)
		}
	}
}

func TestOptionsFromEnv(t *testing.T) {
	t.Setenv("HF_HOME", "/tmp/hfhome")
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_TOKEN", "tok")
	t.Setenv("HF_HUB_OFFLINE", "1")
	o := OptionsFromEnv()
	if o.CacheDir != "/tmp/hfhome/hub" || o.Token != "tok" || !o.Offline {
		t.Errorf("%+v", o)
	}
}
