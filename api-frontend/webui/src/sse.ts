// Server-sent events over fetch: the OpenAI streaming endpoints are POSTs,
// which EventSource cannot make, so the playground reads the response body
// and splits it into events here.

/** SSEParser turns text fragments into the data of complete events. */
export class SSEParser {
  private buf = "";
  private data: string[] = [];

  /** push adds a fragment and returns the data of the events it completed. */
  push(text: string): string[] {
    this.buf += text;
    const out: string[] = [];
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

  /** end flushes an event the stream ended without a blank line after. */
  end(): string[] {
    const out: string[] = [];
    if (this.buf !== "") this.line(this.buf, out);
    this.buf = "";
    this.line("", out);
    return out;
  }

  private line(line: string, out: string[]): void {
    if (line === "") {
      if (this.data.length > 0) out.push(this.data.join("\n"));
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return; // comment
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
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
 * streamEvents POSTs body to url and yields each event's parsed JSON until
 * `data: [DONE]` or the end of the body. An HTTP error or an
 * `{"error": …}` event throws APIError; aborting signal closes the stream.
 */
export async function* streamEvents(
  url: string,
  body: unknown,
  headers: Record<string, string>,
  signal: AbortSignal,
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
      const events = done ? parser.end() : parser.push(value);
      for (const data of events) {
        if (data === "[DONE]") return;
        let j: any;
        try {
          j = JSON.parse(data);
        } catch {
          throw new APIError(`malformed event from the server: ${data.slice(0, 200)}`, resp.status, "", null, true);
        }
        if (j && typeof j === "object" && "error" in j && !("choices" in j)) {
          throw errorFromBody(resp.status, data, true);
        }
        yield j;
      }
      if (done) return;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
