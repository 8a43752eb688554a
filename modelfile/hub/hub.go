// Package hub downloads models from the Hugging Face Hub into the standard
// Hugging Face cache layout, so that files fetched by Sluice and by Python
// tools are shared:
//
//	$HF_HUB_CACHE (default $HF_HOME/hub, default ~/.cache/huggingface/hub)
//	  models--org--name/
//	    refs/main                      the commit the revision resolved to
//	    blobs/<etag>                   file contents, named by their ETag
//	    snapshots/<commit>/<file>      symlinks to ../../blobs/<etag>
//
// HF_TOKEN (or HF_HUB_TOKEN) is sent as a bearer token; HF_HUB_OFFLINE=1
// uses the cache only; HF_ENDPOINT replaces https://huggingface.co.
// Interrupted downloads resume from blobs/<etag>.incomplete with an HTTP
// Range request.
package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Options configure Download.
type Options struct {
	// Endpoint is the Hub's base URL (default https://huggingface.co).
	Endpoint string
	// Token authenticates to the Hub ("" for anonymous).
	Token string
	// CacheDir is the hub cache root.
	CacheDir string
	// Offline forbids network access: only cached snapshots are used.
	Offline bool
	// Revision is the branch, tag or commit (default "main").
	Revision string
	// Client makes the requests (default http.DefaultClient).
	Client *http.Client
}

// OptionsFromEnv reads HF_ENDPOINT, HF_TOKEN / HF_HUB_TOKEN, HF_HUB_CACHE,
// HF_HOME and HF_HUB_OFFLINE.
func OptionsFromEnv() Options {
	o := Options{Endpoint: os.Getenv("HF_ENDPOINT"), Token: os.Getenv("HF_TOKEN"), CacheDir: os.Getenv("HF_HUB_CACHE")}
	if o.Token == "" {
		o.Token = os.Getenv("HF_HUB_TOKEN")
	}
	if o.CacheDir == "" {
		home := os.Getenv("HF_HOME")
		if home == "" {
			if h, err := os.UserHomeDir(); err == nil {
				home = filepath.Join(h, ".cache", "huggingface")
			}
		}
		o.CacheDir = filepath.Join(home, "hub")
	}
	switch strings.ToLower(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "true", "yes", "on":
		o.Offline = true
	}
	return o
}

var repoRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$`)

// IsRepoID reports whether s looks like a Hub model id ("org/name") rather
// than a local path.
func IsRepoID(s string) bool {
	if !repoRE.MatchString(s) || strings.Contains(s, "..") {
		return false
	}
	_, err := os.Stat(s)
	return errors.Is(err, os.ErrNotExist)
}

// wanted reports whether a repository file is needed to serve the model.
func wanted(name string) bool {
	if strings.Contains(name, "/") {
		return false
	}
	switch name {
	case "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
		"special_tokens_map.json", "model.safetensors.index.json":
		return true
	}
	return strings.HasSuffix(name, ".safetensors")
}

func (o *Options) defaults() {
	if o.Endpoint == "" {
		o.Endpoint = "https://huggingface.co"
	}
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	if o.Revision == "" {
		o.Revision = "main"
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
}

// repoDir is models--org--name under the cache.
func (o *Options) repoDir(repo string) string {
	return filepath.Join(o.CacheDir, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// Download makes sure the files needed to serve repo (config, tokenizer and
// safetensors weights) are in the cache and returns the snapshot
// directory holding them.
func Download(ctx context.Context, repo string, o Options) (string, error) {
	o.defaults()
	if !repoRE.MatchString(repo) {
		return "", fmt.Errorf("hub: %q is not a model id (org/name)", repo)
	}
	rd := o.repoDir(repo)
	if o.Offline {
		return cachedSnapshot(rd, repo, o.Revision)
	}
	info, err := o.modelInfo(ctx, repo)
	if err != nil {
		if snap, cerr := cachedSnapshot(rd, repo, o.Revision); cerr == nil {
			return snap, nil // the Hub is unreachable but the cache has it
		}
		return "", err
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(info.SHA) {
		return "", fmt.Errorf("hub: %s: bad commit %q from the Hub", repo, info.SHA)
	}
	snap := filepath.Join(rd, "snapshots", info.SHA)
	n := 0
	for _, s := range info.Siblings {
		if !wanted(s.RFilename) {
			continue
		}
		n++
		if _, err := os.Stat(filepath.Join(snap, s.RFilename)); err == nil {
			continue
		}
		if err := o.fetch(ctx, repo, info.SHA, s.RFilename, rd, snap); err != nil {
			return "", err
		}
	}
	if n == 0 {
		return "", fmt.Errorf("hub: %s has no config.json or safetensors files", repo)
	}
	if err := os.MkdirAll(filepath.Join(rd, "refs"), 0o755); err != nil {
		return "", fmt.Errorf("hub: %w", err)
	}
	if o.Revision != info.SHA {
		if err := os.WriteFile(filepath.Join(rd, "refs", filepath.Base(o.Revision)), []byte(info.SHA), 0o644); err != nil {
			return "", fmt.Errorf("hub: %w", err)
		}
	}
	return snap, nil
}

// cachedSnapshot resolves a revision with the cache alone.
func cachedSnapshot(rd, repo, rev string) (string, error) {
	commit := rev
	if b, err := os.ReadFile(filepath.Join(rd, "refs", filepath.Base(rev))); err == nil {
		commit = strings.TrimSpace(string(b))
	}
	snap := filepath.Join(rd, "snapshots", filepath.Base(commit))
	if _, err := os.Stat(filepath.Join(snap, "config.json")); err != nil {
		return "", fmt.Errorf("hub: %s@%s is not in the cache %s (offline mode, or the Hub is unreachable)", repo, rev, rd)
	}
	return snap, nil
}

type modelInfo struct {
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
	} `json:"siblings"`
}

// etag returns a file's ETag (X-Linked-Etag for large files) from a HEAD
// request that does not follow redirects.
func (o *Options) etag(ctx context.Context, u string) (string, error) {
	c := *o.Client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
	if err != nil {
		return "", err
	}
	if o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+o.Token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("HEAD %s: %w", u, err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return "", fmt.Errorf("HEAD %s: %s", u, resp.Status)
	}
	etag := resp.Header.Get("X-Linked-Etag")
	if etag == "" {
		etag = resp.Header.Get("ETag")
	}
	return etag, nil
}

func (o *Options) get(ctx context.Context, u string, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	if o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+o.Token)
	}
	req.Header.Set("User-Agent", "sluice")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("hub: GET %s: %w", u, err)
	}
	return resp, nil
}

func (o *Options) modelInfo(ctx context.Context, repo string) (*modelInfo, error) {
	u := fmt.Sprintf("%s/api/models/%s/revision/%s", o.Endpoint, repo, url.PathEscape(o.Revision))
	resp, err := o.get(ctx, u, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("hub: %s: access denied (%s); set HF_TOKEN for gated or private models", repo, resp.Status)
	case http.StatusNotFound:
		return nil, fmt.Errorf("hub: %s@%s not found", repo, o.Revision)
	default:
		return nil, fmt.Errorf("hub: %s: %s", u, resp.Status)
	}
	var info modelInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		return nil, fmt.Errorf("hub: %s: decode model info: %w", repo, err)
	}
	return &info, nil
}

// fetch downloads one file into blobs/ (resuming a partial download) and
// links it from the snapshot.
func (o *Options) fetch(ctx context.Context, repo, commit, name, rd, snap string) error {
	u := fmt.Sprintf("%s/%s/resolve/%s/%s", o.Endpoint, repo, commit, url.PathEscape(name))
	blobs := filepath.Join(rd, "blobs")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	// The ETag names the blob. Ask for it with a HEAD that does not follow
	// the redirect to the CDN: the Hub puts X-Linked-Etag on the redirect.
	etag, err := o.etag(ctx, u)
	if err != nil {
		return fmt.Errorf("hub: %s/%s: %w", repo, name, err)
	}
	etag = strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
	if etag == "" || strings.ContainsAny(etag, `/\`) || etag == "." || etag == ".." {
		etag = commit + "-" + strings.ReplaceAll(name, "/", "_")
	}
	blob := filepath.Join(blobs, etag)
	if _, err := os.Stat(blob); err != nil {
		if err := o.download(ctx, u, blob); err != nil {
			return fmt.Errorf("hub: %s/%s: %w", repo, name, err)
		}
	}
	dst := filepath.Join(snap, name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	rel, err := filepath.Rel(filepath.Dir(dst), blob)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	os.Remove(dst)
	if err := os.Symlink(rel, dst); err != nil {
		return fmt.Errorf("hub: link %s: %w", dst, err)
	}
	return nil
}

// download writes u into blob via blob.incomplete, resuming from what is
// already there.
func (o *Options) download(ctx context.Context, u, blob string) error {
	part := blob + ".incomplete"
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	var hdr map[string]string
	if have > 0 {
		hdr = map[string]string{"Range": fmt.Sprintf("bytes=%d-", have)}
	}
	resp, err := o.get(ctx, u, hdr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK: // no range support: start over
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		have = 0
	case http.StatusRequestedRangeNotSatisfiable:
		// already complete
	default:
		return fmt.Errorf("GET %s: %s", path.Base(u), resp.Status)
	}
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		n, err := io.Copy(f, resp.Body)
		if err != nil {
			return fmt.Errorf("download interrupted after %d bytes (will resume): %w", have+n, err)
		}
		if resp.ContentLength >= 0 && n != resp.ContentLength {
			return fmt.Errorf("short download: %d of %d bytes (will resume)", n, resp.ContentLength)
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(part, blob)
}
