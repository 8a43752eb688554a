// Server-sent events over fetch: the OpenAI streaming endpoints are POSTs,
// which EventSource cannot make, so the playground reads the response body
// and splits it into events here.

/** RawEvent is one complete server-sent event: its name ("" when none) and data. */
export interface RawEvent {
  event: string;
  data: string;
}

/** SSEParser turns text fragments into complete events. */
export class SSEParser {
  private buf = "";
  private data: string[] = [];
  private event = "";

  /** push adds a fragment and returns the data of the events it completed. */
  push(text: string): string[] {
    return this.pushEvents(text).map((e) => e.data);
  }

  /** end flushes an event the stream ended without a blank line after. */
  end(): string[] {
    return this.endEvents().map((e) => e.data);
  }

  /** pushEvents adds a fragment and returns the events (name and data) it completed. */
  pushEvents(text: string): RawEvent[] {
    this.buf += text;
    const out: RawEvent[] = [];
    for (;;) {
      const nl = this.buf.search(/\r\n|\r|\n/);
      if (nl < 0) break;
      // A lone \r at the end may be the first half of \r\n: wait for more.
      if (this.buf[nl] === "\r" && nl === this.buf.length - 1) break;
      const eol = this.buf.startsWith("\r\n", nl) ? 2 : 1;
      const line = this.buf.slice(0, nl);
      this.buf = this.buf.slice(nl + eol);
      this.line(line, out);
    }
    return out;
  }

  /** endEvents flushes an event the stream ended without a blank line after. */
  endEvents(): RawEvent[] {
    const out: RawEvent[] = [];
    if (this.buf !== "") this.line(this.buf, out);
    this.buf = "";
    this.line("", out);
    return out;
  }

  private line(line: string, out: RawEvent[]): void {
    if (line === "") {
      if (this.data.length > 0) out.push({ event: this.event, data: this.data.join("\n") });
      this.data = [];
      this.event = "";
      return;
    }
    if (line.startsWith(":")) return; // comment
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
  }
}

/** APIError is an OpenAI-style error: from an HTTP error body or a mid-stream event. */
export class APIError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly type: string,
    readonly param: string | null,
    readonly midStream: boolean,
  ) {
    super(message);
    this.name = "APIError";
  }
}

/** errorFromBody reads `{"error": {message, type, param, code}}`, or explains what came instead. */
export function errorFromBody(status: number, body: string, midStream: boolean): APIError {
  try {
    const j = JSON.parse(body);
    const e = j && typeof j === "object" ? j.error : undefined;
    if (e && typeof e === "object") {
      const code = typeof e.code === "number" ? e.code : status;
      return new APIError(String(e.message ?? "unknown error"), code, String(e.type ?? ""), e.param ?? null, midStream);
    }
    if (typeof e === "string") return new APIError(e, status, "", null, midStream);
  } catch {
    // not JSON: fall through
  }
  const text = body.trim().slice(0, 500) || "(empty body)";
  return new APIError(`HTTP ${status}: ${text}`, status, "", null, midStream);
}

/**
 * streamError returns the APIError an event's JSON carries, or null: the
 * OpenAI shape `{"error": {…}}`, the Anthropic shape `{"type": "error",
 * "error": {…}}` and the Responses shapes `{"type": "error", "message"}` and
 * `{"type": "response.failed", "response": {"error": {…}}}`.
 */
export function streamError(status: number, j: any, data: string): APIError | null {
  if (!j || typeof j !== "object" || "choices" in j) return null;
  if ("error" in j && j.error && typeof j.error === "object") return errorFromBody(status, JSON.stringify({ error: j.error }), true);
  if ("error" in j && typeof j.error === "string") return errorFromBody(status, data, true);
  if (j.type === "error" && typeof j.message === "string") {
    return new APIError(j.message, status, String(j.code ?? ""), j.param ?? null, true);
  }
  if (j.type === "response.failed") {
    const e = j.response?.error;
    return new APIError(String(e?.message ?? "the response failed"), status, String(e?.code ?? ""), null, true);
  }
  return null;
}

/**
 * streamEvents POSTs body to url and yields each event's parsed JSON until
 * `data: [DONE]` or the end of the body. An HTTP error or an error event
 * (see streamError) throws APIError; aborting signal closes the stream.
 * onRaw, when given, sees every event's name and data as they arrive.
 */
export async function* streamEvents(
  url: string,
  body: unknown,
  headers: Record<string, string>,
  signal: AbortSignal,
  onRaw?: (ev: RawEvent) => void,
): AsyncGenerator<any, void, void> {
  const resp = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...headers },
    body: JSON.stringify(body),
    signal,
  });
  if (!resp.ok) throw errorFromBody(resp.status, await resp.text(), false);
  if (!resp.body) throw new APIError("the response has no body", resp.status, "", null, false);
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  const parser = new SSEParser();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      const events = done ? parser.endEvents() : parser.pushEvents(value);
      for (const ev of events) {
        onRaw?.(ev);
        const data = ev.data;
        if (data === "[DONE]") return;
        let j: any;
        try {
          j = JSON.parse(data);
        } catch {
          throw new APIError(`malformed event from the server: ${data.slice(0, 200)}`, resp.status, "", null, true);
        }
        const err = streamError(resp.status, j, data);
        if (err) throw err;
        yield j;
      }
      if (done) return;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
