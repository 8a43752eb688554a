package fakeapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// namedEvents posts body with headers and returns the stream's event names
// (consecutive repeats collapsed) and the text of its deltas.
func namedEvents(t *testing.T, hs *httptest.Server, path, body string, hdr map[string]string) (int, []string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, hs.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var names []string
	var text strings.Builder
	name := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			if resp.StatusCode != http.StatusOK && line != "" {
				text.WriteString(line)
			}
			continue
		}
		var ev struct {
			Type  string          `json:"type"`
			Delta json.RawMessage `json:"delta"`
		}
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("event %q: bad data %q: %v", name, d, err)
		}
		if !strings.HasPrefix(d, `{"type":"`+name+`"`) {
			t.Errorf("event %q: data does not start with its type: %s", name, d)
		}
		if ev.Type != name {
			t.Errorf("event %q carries type %q", name, ev.Type)
		}
		if len(names) == 0 || names[len(names)-1] != name {
			names = append(names, name)
		}
		var s string
		var blk struct {
			Text        string `json:"text"`
			Thinking    string `json:"thinking"`
			PartialJSON string `json:"partial_json"`
		}
		if json.Unmarshal(ev.Delta, &s) == nil {
			text.WriteString(s)
		} else if json.Unmarshal(ev.Delta, &blk) == nil {
			text.WriteString(blk.Text + blk.Thinking + blk.PartialJSON)
		}
	}
	return resp.StatusCode, names, text.String()
}

func TestResponsesAndMessagesStreams(t *testing.T) {
	_, hs := newTest(t, Config{})
	anth := map[string]string{"anthropic-version": "2023-06-01"}
	tools := `"tools":[{"type":"function","name":"get_weather"}]`
	atools := `"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]`
	for _, tc := range []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		names            []string
		text             string
	}{
		{"responses text", "/v1/responses", `{"stream":true,"input":"hi","max_output_tokens":3}`, nil, 200,
			[]string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
				"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
				"response.incomplete"}, "Sluice streams tokens"},
		{"responses reasoning and tool", "/v1/responses", `{"stream":true,"instructions":"be brief","input":[{"role":"user","content":"think about the weather"}],` + tools + `}`, nil, 200,
			[]string{"response.created", "response.in_progress", "response.output_item.added", "response.reasoning_text.delta",
				"response.reasoning_text.done", "response.output_item.done", "response.output_item.added",
				"response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
				"response.completed"}, "The user wants me to think first. I will reason briefly, then answer. " + `{"city": "Paris", "unit": "celsius"}`},
		{"responses mid-stream error", "/v1/responses", `{"stream":true,"input":"please fail","max_output_tokens":10}`, nil, 200,
			[]string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
				"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
				"response.failed"}, "Sluice streams tokens from the"},
		{"responses refused", "/v1/responses", `{"stream":true,"input":"refuse"}`, nil, 400, nil, `{"error":{"code":400,"message":"the fake server refuses prompts that say refuse","param":null,"type":"invalid_request_error"}}`},
		{"messages text", "/v1/messages", `{"stream":true,"max_tokens":3,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`, anth, 200,
			[]string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}, "Sluice streams tokens"},
		{"messages reasoning and tool", "/v1/messages", `{"stream":true,"max_tokens":64,"messages":[{"role":"user","content":"think about the weather"}],` + atools + `}`, anth, 200,
			[]string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "content_block_start",
				"content_block_delta", "content_block_stop", "message_delta", "message_stop"},
			"The user wants me to think first. I will reason briefly, then answer. " + `{"city": "Paris", "unit": "celsius"}`},
		{"messages without version", "/v1/messages", `{"stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, nil, 400, nil,
			`{"error":{"message":"the anthropic-version header is required","type":"invalid_request_error"},"type":"error"}`},
		{"messages without max_tokens", "/v1/messages", `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`, anth, 400, nil,
			`{"error":{"message":"max_tokens: field required","type":"invalid_request_error"},"type":"error"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, names, text := namedEvents(t, hs, tc.path, tc.body, tc.hdr)
			if status != tc.status {
				t.Fatalf("status %d, want %d (%s)", status, tc.status, text)
			}
			if strings.Join(names, " ") != strings.Join(tc.names, " ") {
				t.Errorf("events:\n got %q\nwant %q", names, tc.names)
			}
			if text != tc.text {
				t.Errorf("text %q, want %q", text, tc.text)
			}
		})
	}
}
