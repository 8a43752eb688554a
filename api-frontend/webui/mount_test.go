package webui

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestMountUnderGin checks the mounting docs/WEBUI.md gives the server.
func TestMountUnderGin(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	ui := gin.WrapH(Handler(Options{Stats: func() any { return Stats{Model: "m"} }}))
	r.GET("/ui/*path", ui)
	r.HEAD("/ui/*path", ui)
	r.GET("/v1/models", func(c *gin.Context) { c.String(http.StatusOK, "models") })
	for _, tc := range []struct {
		path     string
		status   int
		location string
	}{
		{"/ui", http.StatusMovedPermanently, "/ui/"},
		{"/ui/api/stats", http.StatusOK, ""},
		{"/ui/api/config", http.StatusOK, ""},
		{"/ui/nope", http.StatusNotFound, ""},
		{"/v1/models", http.StatusOK, ""},
	} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", tc.path, nil))
		if w.Code != tc.status || w.Header().Get("Location") != tc.location {
			t.Errorf("GET %s: %d Location %q, want %d %q", tc.path, w.Code, w.Header().Get("Location"), tc.status, tc.location)
		}
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("GET", "/ui/", nil))
	if want := map[bool]int{true: 200, false: 503}[Built()]; w.Code != want || w.Header().Get("Content-Security-Policy") != CSP {
		t.Errorf("GET /ui/: %d, CSP %q; want %d with the CSP", w.Code, w.Header().Get("Content-Security-Policy"), want)
	}
}
