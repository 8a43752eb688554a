package server

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

func TestInfoEndpoints(t *testing.T) {
	env := newTestEnv(t, Config{ServedModelNames: []string{"m", "alias"}, FrontendID: "fe-1", Version: "v9"}, "abc")
	_, body := env.post("/tokenize", `{"prompt":"hi!","return_token_strs":true}`)
	var tok struct {
		Count       int      `json:"count"`
		MaxModelLen int      `json:"max_model_len"`
		Tokens      []int32  `json:"tokens"`
		TokenStrs   []string `json:"token_strs"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.Count != 3 || tok.Tokens[0] != 'h' || tok.TokenStrs[2] != "!" || tok.MaxModelLen != 256 {
		t.Fatalf("/tokenize: %s", body)
	}
	_, body = env.post("/tokenize", `{"model":"alias","messages":[{"role":"user","content":"x"}]}`)
	if err := json.Unmarshal(body, &tok); err != nil || tok.Count != len("user: x\nassistant: ") {
		t.Fatalf("/tokenize messages: %s", body)
	}
	_, body = env.post("/detokenize", `{"tokens":[104,105]}`)
	if string(body) != `{"prompt":"hi"}` {
		t.Fatalf("/detokenize: %s", body)
	}
	get := func(path string) []byte {
		r, err := http.Get(env.http.URL + path)
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", path, err, r)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return b
	}
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
			VocabSize   int    `json:"vocab_size"`
		} `json:"data"`
	}
	if err := json.Unmarshal(get("/v1/models"), &models); err != nil || models.Object != "list" || len(models.Data) != 2 || models.Data[1].ID != "alias" || models.Data[0].MaxModelLen != 256 ||
		models.Data[0].VocabSize != (byteTok{}).VocabSize() {
		t.Fatalf("/v1/models: %+v", models)
	}
	var v struct {
		Version    string `json:"version"`
		FrontendID string `json:"frontend_id"`
		PID        int    `json:"pid"`
	}
	if err := json.Unmarshal(get("/version"), &v); err != nil || v.Version != "v9" || v.FrontendID != "fe-1" || v.PID == 0 {
		t.Fatalf("/version: %+v", v)
	}
	// the alias is accepted for generation too
	if r, b := env.post("/v1/completions", `{"model":"alias","prompt":"x","max_tokens":2}`); r.StatusCode != 200 {
		t.Fatalf("alias: %d %s", r.StatusCode, b)
	}
	// unknown routes and methods are JSON errors
	if r, _ := env.post("/v2/nothing", `{}`); r.StatusCode != 404 {
		t.Fatalf("unknown route: %d", r.StatusCode)
	}
}
