// The playground page (/ui/): chat (through Chat Completions, Responses or
// Messages) and raw completions streamed over the server's own endpoints, with
// live per-request figures and the raw event stream.
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { Chart, el, fmtMs, fmtNum, make, type UIConfig } from "./common";
import { APIError, errorFromBody, streamEvents, type RawEvent } from "./sse";

type Mode = "chat" | "completion";

/** API is the endpoint a chat turn goes through. */
type API = "chat" | "responses" | "messages";

/** maxRawEvents bounds the raw events panel; later events are counted, not shown. */
const maxRawEvents = 2000;

interface ChatMessage {
  role: string;
  content: string | null;
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
}

/** ToolCallView is one streamed tool call as it assembles. */
interface ToolCallView {
  id: string;
  name: string;
  args: string;
  box: HTMLElement;
  nameEl: HTMLElement;
  argsEl: HTMLElement;
}

/** Figures are the live per-request measurements. */
class Figures {
  t0 = 0;
  tFirst: number | null = null;
  tLast: number | null = null;
  chunks = 0;
  tokens: number | null = null;
  finish: string | null = null;
  gaps: number[] = [];
  private timer = 0;

  constructor(private chart: Chart) {}

  start(): void {
    this.t0 = performance.now();
    this.tFirst = this.tLast = null;
    this.chunks = 0;
    this.tokens = null;
    this.finish = null;
    this.gaps = [];
    this.chart.set([[], []]);
    this.status("waiting for first token…");
    this.render();
    window.clearInterval(this.timer);
    this.timer = window.setInterval(() => this.render(), 100);
  }

  chunk(hasOutput: boolean): void {
    const now = performance.now();
    this.chunks++;
    if (hasOutput && this.tFirst === null) {
      this.tFirst = now;
      this.status("streaming");
    }
    if (this.tLast !== null) this.gaps.push(now - this.tLast);
    this.tLast = now;
  }

  stop(status: string): void {
    window.clearInterval(this.timer);
    this.status(status);
    this.render();
  }

  status(s: string): void {
    el("m-status").textContent = s;
  }

  render(): void {
    const now = performance.now();
    el("m-ttft").textContent = this.tFirst === null ? "–" : fmtMs(this.tFirst - this.t0);
    el("m-chunks").textContent = String(this.chunks);
    el("m-tokens").textContent = this.tokens === null ? "–" : String(this.tokens);
    el("m-finish").textContent = this.finish ?? "–";
    el("m-elapsed").textContent = fmtMs((this.tLast ?? now) - this.t0);
    let tps: number | null = null;
    if (this.tokens !== null && this.tokens > 1 && this.tFirst !== null && this.tLast !== null && this.tLast > this.tFirst) {
      tps = ((this.tokens - 1) * 1000) / (this.tLast - this.tFirst); // decode rate after the first token
    }
    el("m-tps").textContent = fmtNum(tps);
    el("m-tpc").textContent = this.tokens !== null && this.chunks > 0 ? fmtNum(this.tokens / this.chunks, 2) : "–";
    el("m-tps").title = "(completion tokens − 1) / (last chunk − first chunk)";
    this.chart.set([this.gaps.map((_, i) => i + 2), this.gaps]);
  }
}

class Playground {
  private mode: Mode = "chat";
  private api: API = "chat";
  private history: ChatMessage[] = [];
  private abort: AbortController | null = null;
  private toolsTimer = 0;
  private figures = new Figures(new Chart(el("gap-chart"), [{ label: "gap ms" }], { height: 120, xTime: false, legend: false }));

  async init(): Promise<void> {
    for (const r of document.querySelectorAll<HTMLInputElement>('input[name="mode"]')) {
      r.addEventListener("change", () => r.checked && this.setMode(r.value as Mode));
    }
    el("composer").addEventListener("submit", (ev) => {
      ev.preventDefault();
      void this.send();
    });
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
        ev.preventDefault();
        if (!this.abort) void this.send();
      } else if (ev.key === "Escape" && this.abort) {
        ev.preventDefault();
        this.stop();
      }
    });
    el("api").addEventListener("change", () => {
      this.api = el<HTMLSelectElement>("api").value as API;
      this.clear();
    });
    el("abort").addEventListener("click", () => this.stop());
    el("clear").addEventListener("click", () => this.clear());
    el("tools-example").addEventListener("click", () => {
      el<HTMLTextAreaElement>("tools").value = JSON.stringify(exampleTools, null, 2);
      checkTools();
    });
    el("apikey").addEventListener("change", () => void this.loadModels());
    el("tools").addEventListener("input", () => {
      window.clearTimeout(this.toolsTimer);
      this.toolsTimer = window.setTimeout(() => checkTools(), 300);
    });
    if (navigator.platform.toLowerCase().includes("mac")) el("send").querySelector("kbd")!.textContent = "⌘+Enter";

    try {
      const r = await fetch("api/config");
      const cfg = (await r.json()) as UIConfig;
      el("apikey-row").hidden = !cfg.api_key_required;
    } catch (e) {
      this.showError(`cannot read the UI's configuration: ${String(e)}`);
    }
    await this.loadModels();
  }

  private headers(): Record<string, string> {
    const key = el<HTMLInputElement>("apikey").value.trim();
    return key ? { Authorization: `Bearer ${key}` } : {};
  }

  async loadModels(): Promise<void> {
    const sel = el<HTMLSelectElement>("model");
    try {
      const r = await fetch("/v1/models", { headers: this.headers() });
      const body = await r.text();
      if (!r.ok) {
        const err = errorFromBody(r.status, body, false);
        sel.replaceChildren(new Option("(no models: see the error)", ""));
        if (r.status === 401) el("apikey-row").hidden = false;
        this.showError(`listing models: ${err.message}`);
        return;
      }
      const ids: string[] = (JSON.parse(body).data ?? []).map((m: { id: string }) => m.id);
      const prev = sel.value;
      sel.replaceChildren(...ids.map((id) => new Option(id, id)));
      if (ids.includes(prev)) sel.value = prev;
      el("server-model").textContent = ids.length ? `serving ${ids.join(", ")}` : "no models";
      this.hideError();
    } catch (e) {
      this.showError(`listing models: ${String(e)}`);
    }
  }

  private setMode(m: Mode): void {
    this.mode = m;
    el("chat-only").hidden = m !== "chat";
    el("input-label").textContent = m === "chat" ? "Message" : "Prompt";
    this.clear();
  }

  private clear(): void {
    if (this.abort) this.stop();
    this.history = [];
    el("transcript").replaceChildren();
    el("raw-events").replaceChildren();
    el("raw-count").textContent = "";
    this.hideError();
  }

  private stop(): void {
    this.abort?.abort();
  }

  private showError(msg: string): void {
    const e = el("error");
    e.textContent = msg;
    e.hidden = false;
  }

  private hideError(): void {
    el("error").hidden = true;
    el("error").textContent = "";
  }

  private num(id: string): number | undefined {
    const v = el<HTMLInputElement>(id).value.trim();
    if (v === "") return undefined;
    const n = Number(v);
    return Number.isFinite(n) ? n : undefined;
  }

  /** body builds the request; it throws a message for bad input. */
  private body(input: string): { url: string; body: Record<string, unknown> } {
    const b: Record<string, unknown> = {
      model: el<HTMLSelectElement>("model").value || undefined,
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: el<HTMLInputElement>("continuous_usage").checked },
      temperature: this.num("temperature"),
      top_p: this.num("top_p"),
      max_tokens: this.num("max_tokens"),
      seed: this.num("seed"),
      stream_interval: this.num("stream_interval"),
    };
    const stops = el<HTMLTextAreaElement>("stop").value.split("\n").filter((s) => s !== "");
    if (stops.length) b.stop = stops;
    if (this.mode === "completion") return { url: "/v1/completions", body: { ...b, prompt: input } };

    const sys = el<HTMLTextAreaElement>("system").value.trim();
    const tools = checkTools();
    if (tools === null) {
      (el("tools-box") as HTMLDetailsElement).open = true;
      throw new Error("fix the tools JSON first");
    }
    const choice = el<HTMLSelectElement>("tool_choice").value;
    if (this.api === "responses") return { url: "/v1/responses", body: responsesBody(b, sys, this.history, input, tools, choice) };
    if (this.api === "messages") return { url: "/v1/messages", body: messagesBody(b, sys, this.history, input, tools, choice) };

    const msgs: ChatMessage[] = [];
    if (sys) msgs.push({ role: "system", content: sys });
    msgs.push(...this.history, { role: "user", content: input });
    b.messages = msgs;
    if (tools.length) {
      b.tools = tools;
      b.tool_choice = choice;
    }
    return { url: "/v1/chat/completions", body: b };
  }

  /** headersFor adds what the chosen API needs to the auth headers. */
  private headersFor(): Record<string, string> {
    const h = this.headers();
    if (this.mode === "chat" && this.api === "messages") h["anthropic-version"] = "2023-06-01";
    return h;
  }

  /** raw appends one event to the raw events panel. */
  private raw(ev: RawEvent): void {
    const list = el("raw-events");
    const n = Number(list.dataset.total ?? "0") + 1;
    list.dataset.total = String(n);
    el("raw-count").textContent = n > maxRawEvents ? `(${n} events, first ${maxRawEvents} shown)` : `(${n} events)`;
    if (n > maxRawEvents) return;
    const li = make("li", "raw-event");
    li.append(make("code", "ev-name", ev.event === "" ? "(data)" : ev.event), make("pre", "ev-data", ev.data));
    list.append(li);
  }

  async send(): Promise<void> {
    if (this.abort) return;
    const inputEl = el<HTMLTextAreaElement>("input");
    const input = inputEl.value;
    if (input.trim() === "") {
      inputEl.focus();
      return;
    }
    this.hideError();
    let req: { url: string; body: Record<string, unknown> };
    try {
      req = this.body(input);
    } catch (e) {
      this.showError((e as Error).message);
      return;
    }
    const transcript = el("transcript");
    if (this.mode === "chat") {
      transcript.append(messageView("user", input).box);
      inputEl.value = "";
    } else {
      transcript.replaceChildren();
    }
    const view = messageView("assistant", "");
    if (this.mode === "completion") view.content.prepend(make("span", "prompt", input));
    transcript.append(view.box);
    view.box.dataset.state = "streaming";
    view.box.setAttribute("aria-busy", "true");

    const ctl = new AbortController();
    this.abort = ctl;
    el<HTMLButtonElement>("abort").disabled = false;
    el<HTMLButtonElement>("send").disabled = true;
    const fig = this.figures;
    fig.start();

    let content = "";
    let reasoning = "";
    const calls = new Map<number, ToolCallView>();
    let state = "done";
    const rawList = el("raw-events");
    rawList.replaceChildren();
    rawList.dataset.total = "0";
    el("raw-count").textContent = "";
    rawList.dataset.api = this.mode === "chat" ? this.api : "completions";
    // The Responses and Messages renderers: they add to the same view as chat.
    const addReasoning = (r: string) => {
      reasoning += r;
      view.reasoningText.textContent = reasoning;
      if (view.reasoning.hidden) {
        view.reasoning.hidden = false;
        view.reasoning.open = true;
      }
    };
    const addContent = (t: string) => {
      content += t;
      view.text.textContent = content;
    };
    const call = (idx: number): ToolCallView => {
      let c = calls.get(idx);
      if (!c) {
        c = toolCallView(idx);
        calls.set(idx, c);
        view.tools.append(c.box);
      }
      return c;
    };
    const startCall = (idx: number, id: string, name: string) => {
      const c = call(idx);
      c.id = id;
      c.name = name;
      c.nameEl.textContent = name;
    };
    const addArgs = (idx: number, frag: string) => {
      const c = call(idx);
      c.args += frag;
      c.argsEl.textContent = c.args;
      c.box.dataset.fragments = String(Number(c.box.dataset.fragments ?? "0") + 1);
    };
    const api = this.mode === "chat" ? this.api : "chat";
    try {
      for await (const ev of streamEvents(req.url, req.body, this.headersFor(), ctl.signal, (r) => this.raw(r))) {
        if (api === "responses") {
          let out = false;
          switch (ev.type) {
            case "response.reasoning_text.delta":
            case "response.reasoning_summary_text.delta":
              addReasoning(String(ev.delta ?? ""));
              out = true;
              break;
            case "response.output_text.delta":
              addContent(String(ev.delta ?? ""));
              out = true;
              break;
            case "response.output_item.added":
              if (ev.item?.type === "function_call") {
                startCall(Number(ev.output_index ?? 0), String(ev.item.call_id ?? ""), String(ev.item.name ?? ""));
                out = true;
              }
              break;
            case "response.function_call_arguments.delta":
              addArgs(Number(ev.output_index ?? 0), String(ev.delta ?? ""));
              out = true;
              break;
            case "response.completed":
            case "response.incomplete": {
              const r = ev.response ?? {};
              if (typeof r.usage?.output_tokens === "number") fig.tokens = r.usage.output_tokens;
              fig.finish = r.incomplete_details?.reason ?? r.status ?? null;
              break;
            }
          }
          fig.chunk(out);
          continue;
        }
        if (api === "messages") {
          let out = false;
          switch (ev.type) {
            case "content_block_start":
              if (ev.content_block?.type === "tool_use") {
                startCall(Number(ev.index ?? 0), String(ev.content_block.id ?? ""), String(ev.content_block.name ?? ""));
                out = true;
              }
              break;
            case "content_block_delta": {
              const d = ev.delta ?? {};
              if (d.type === "text_delta") addContent(String(d.text ?? ""));
              else if (d.type === "thinking_delta") addReasoning(String(d.thinking ?? ""));
              else if (d.type === "input_json_delta") addArgs(Number(ev.index ?? 0), String(d.partial_json ?? ""));
              out = d.type !== "signature_delta";
              break;
            }
            case "message_delta":
              if (typeof ev.usage?.output_tokens === "number") fig.tokens = ev.usage.output_tokens;
              if (ev.delta?.stop_reason) fig.finish = ev.delta.stop_reason;
              break;
          }
          fig.chunk(out);
          continue;
        }
        if (ev.usage && typeof ev.usage.completion_tokens === "number") fig.tokens = ev.usage.completion_tokens;
        const choices = Array.isArray(ev.choices) ? ev.choices : [];
        if (choices.length === 0) continue; // the usage chunk
        let out = false;
        for (const ch of choices) {
          if (ch.finish_reason) fig.finish = ch.finish_reason;
          if (this.mode === "completion") {
            if (typeof ch.text === "string" && ch.text !== "") {
              content += ch.text;
              view.text.textContent = content;
              out = true;
            }
            continue;
          }
          const d = ch.delta ?? {};
          const r = d.reasoning ?? d.reasoning_content;
          if (typeof r === "string" && r !== "") {
            reasoning += r;
            view.reasoningText.textContent = reasoning;
            if (view.reasoning.hidden) {
              view.reasoning.hidden = false;
              view.reasoning.open = true;
            }
            out = true;
          }
          if (typeof d.content === "string" && d.content !== "") {
            content += d.content;
            view.text.textContent = content;
            out = true;
          }
          for (const tc of Array.isArray(d.tool_calls) ? d.tool_calls : []) {
            out = true;
            const idx = typeof tc.index === "number" ? tc.index : 0;
            let c = calls.get(idx);
            if (!c) {
              c = toolCallView(idx);
              calls.set(idx, c);
              view.tools.append(c.box);
            }
            if (tc.id) c.id = tc.id;
            if (tc.function?.name) {
              c.name += tc.function.name;
              c.nameEl.textContent = c.name;
            }
            if (typeof tc.function?.arguments === "string") {
              c.args += tc.function.arguments;
              c.argsEl.textContent = c.args;
              c.box.dataset.fragments = String(Number(c.box.dataset.fragments ?? "0") + 1);
            }
          }
        }
        fig.chunk(out);
      }
      if (view.reasoning.open && content !== "") view.reasoning.open = false;
    } catch (e) {
      if (ctl.signal.aborted) {
        state = "aborted";
      } else {
        state = "error";
        const msg = e instanceof APIError ? apiErrorText(e) : `request failed: ${String(e)}`;
        this.showError(msg);
        view.box.append(make("p", "error inline", msg));
      }
    } finally {
      this.abort = null;
      el<HTMLButtonElement>("abort").disabled = true;
      el<HTMLButtonElement>("send").disabled = false;
    }
    for (const c of calls.values()) {
      try {
        c.argsEl.textContent = JSON.stringify(JSON.parse(c.args), null, 2);
        c.box.dataset.valid = "true";
      } catch {
        c.box.dataset.valid = "false";
      }
    }
    view.box.dataset.state = state;
    view.box.removeAttribute("aria-busy");
    if (state === "aborted") view.box.append(make("p", "muted inline", "(aborted)"));
    fig.stop(state);
    if (this.mode === "chat") {
      const m: ChatMessage = { role: "assistant", content: content || null };
      if (calls.size) {
        m.tool_calls = [...calls.values()].map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.args } }));
      }
      this.history.push({ role: "user", content: input }, m);
    }
  }
}

/**
 * checkTools validates the tools editor and shows what is wrong under it: it
 * returns the tools (empty when the editor is empty) or null when invalid.
 */
function checkTools(): unknown[] | null {
  const text = el<HTMLTextAreaElement>("tools").value.trim();
  const te = el("tools-error");
  const fail = (msg: string) => {
    te.textContent = msg;
    te.hidden = false;
    el("tools").setAttribute("aria-invalid", "true");
    return null;
  };
  te.hidden = true;
  el("tools").removeAttribute("aria-invalid");
  if (text === "") return [];
  let tools: unknown;
  try {
    tools = JSON.parse(text);
  } catch (e) {
    return fail(`Tools are not valid JSON: ${(e as Error).message}`);
  }
  if (!Array.isArray(tools)) return fail("Tools must be a JSON array of tool definitions.");
  for (const [i, t] of tools.entries()) {
    const name = (t as { function?: { name?: unknown } })?.function?.name;
    if (typeof name !== "string" || name === "") return fail(`Tool ${i} has no function.name.`);
  }
  return tools;
}

/** ChatTool is the part of an OpenAI chat tool definition the other APIs need. */
interface ChatTool {
  function: { name: string; description?: string; parameters?: unknown };
}

/**
 * responsesBody turns the chat request b into a Responses request: the system
 * prompt as `instructions`, the conversation as `input` items (tool calls as
 * function_call items), tools flattened, max_tokens as max_output_tokens.
 */
function responsesBody(b: Record<string, unknown>, sys: string, history: ChatMessage[], input: string, tools: unknown[], choice: string): Record<string, unknown> {
  const { max_tokens, stream_options: _so, ...rest } = b;
  const items: unknown[] = [];
  for (const m of history) {
    // A function_call needs a function_call_output the playground cannot supply: send the text only.
    if (m.content) items.push({ role: m.role, content: m.content });
  }
  items.push({ role: "user", content: input });
  const out: Record<string, unknown> = { ...rest, input: items, max_output_tokens: max_tokens, store: false };
  if (sys) out.instructions = sys;
  if (tools.length) {
    out.tools = (tools as ChatTool[]).map((t) => ({ type: "function", name: t.function.name, description: t.function.description, parameters: t.function.parameters }));
    out.tool_choice = choice;
  }
  return out;
}

/**
 * messagesBody turns the chat request b into an Anthropic Messages request:
 * `system`, the conversation's text as `messages`, the required
 * `max_tokens`, stop as `stop_sequences`, tools with `input_schema`.
 */
function messagesBody(b: Record<string, unknown>, sys: string, history: ChatMessage[], input: string, tools: unknown[], choice: string): Record<string, unknown> {
  const msgs: unknown[] = [];
  for (const m of history) {
    // A tool_use needs a tool_result the playground cannot supply: send the text only.
    if (m.content) msgs.push({ role: m.role, content: m.content });
  }
  msgs.push({ role: "user", content: input });
  const out: Record<string, unknown> = {
    model: b.model,
    max_tokens: b.max_tokens ?? 128,
    stream: true,
    messages: msgs,
    temperature: b.temperature,
    top_p: b.top_p,
  };
  if (sys) out.system = sys;
  if (Array.isArray(b.stop)) out.stop_sequences = b.stop;
  if (tools.length) {
    out.tools = (tools as ChatTool[]).map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters ?? { type: "object" } }));
    out.tool_choice = { type: choice === "required" ? "any" : choice };
  }
  return out;
}

function apiErrorText(e: APIError): string {
  const where = e.midStream ? "Error during the stream" : `HTTP ${e.status}`;
  const extra = [e.type, e.param ? `param: ${e.param}` : ""].filter(Boolean).join(", ");
  return `${where}: ${e.message}${extra ? ` (${extra})` : ""}`;
}

interface MessageView {
  box: HTMLElement;
  content: HTMLElement;
  text: HTMLElement;
  reasoning: HTMLDetailsElement;
  reasoningText: HTMLElement;
  tools: HTMLElement;
}

function messageView(role: string, text: string): MessageView {
  const box = make("article", `msg ${role}`);
  box.append(make("h3", "role", role === "user" ? "You" : "Assistant"));
  const reasoning = make("details", "reasoning");
  reasoning.hidden = true;
  reasoning.append(make("summary", "", "Reasoning"));
  const reasoningText = make("div", "reasoning-text");
  reasoning.append(reasoningText);
  const content = make("div", "content");
  const t = make("span", "text", text);
  content.append(t);
  const tools = make("div", "tool-calls");
  box.append(reasoning, content, tools);
  return { box, content, text: t, reasoning, reasoningText, tools };
}

function toolCallView(index: number): ToolCallView {
  const box = make("section", "tool-call");
  box.dataset.index = String(index);
  const head = make("h4", "", "Tool call ");
  const nameEl = make("code", "tool-name");
  head.append(nameEl);
  const argsEl = make("pre", "tool-args");
  box.append(head, argsEl);
  return { id: "", name: "", args: "", box, nameEl, argsEl };
}

const exampleTools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather in a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
        required: ["city"],
      },
    },
  },
];

void new Playground().init();
