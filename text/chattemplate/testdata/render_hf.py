"""Reference renderer for the chat-template golden tests.

Renders a chat template the way Hugging Face transformers'
apply_chat_template does (ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and loopcontrols; tojson = json.dumps(ensure_ascii=False);
raise_exception; strftime_now), after the message preprocessing vLLM
applies for string-content templates (content parts joined with "\\n",
null content as "", tool-call arguments parsed from JSON strings).

stdin:  {"template": str, "cases": [{"name", "messages", "tools",
         "add_generation_prompt", "continue_final_message", "kwargs",
         "bos_token", "eos_token", "now"}]}
stdout: {name: {"output": str} | {"error": str}}
"""

import copy
import datetime
import json
import sys

import jinja2
from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

PART_KEY = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal"}


def convert_message(m):
    role = m["role"]
    content = m.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    else:
        texts = []
        for p in content:
            if isinstance(p, str):
                texts.append(p)
            else:
                texts.append(p[PART_KEY[p["type"]]])
        text = "\n".join(texts)
    out = {"role": role, "content": text}
    if role == "assistant":
        calls = m.get("tool_calls")
        if calls is not None:
            calls = copy.deepcopy(calls)
            for c in calls:
                fn = c.get("function")
                if isinstance(fn, dict):
                    args = fn.get("arguments")
                    if not args:
                        fn["arguments"] = {}
                    elif isinstance(args, str):
                        fn["arguments"] = json.loads(args)
            out["tool_calls"] = calls
        for key in ("reasoning", "reasoning_content", "thinking"):
            if m.get(key) is not None:
                out["reasoning"] = m[key]
                out["reasoning_content"] = m[key]
                out["thinking"] = m[key]
                break
    if role == "tool" and "tool_call_id" in m:
        out["tool_call_id"] = m["tool_call_id"]
    if isinstance(m.get("name"), str):
        out["name"] = m["name"]
    return out


def render(template, case):
    now = datetime.datetime.fromisoformat(case.get("now") or "2026-01-02T03:04:05")

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now

    if case.get("add_generation_prompt") and case.get("continue_final_message"):
        raise ValueError("continue_final_message and add_generation_prompt are not compatible")
    conv = [convert_message(m) for m in case["messages"]]
    tools = case.get("tools") or None
    kwargs = dict(case.get("kwargs") or {})
    for k in ("messages", "tools", "add_generation_prompt", "bos_token", "eos_token", "raise_exception", "strftime_now"):
        kwargs.pop(k, None)
    compiled = env.from_string(template)
    rendered = compiled.render(
        messages=conv,
        tools=tools,
        add_generation_prompt=bool(case.get("add_generation_prompt")),
        bos_token=case.get("bos_token", ""),
        eos_token=case.get("eos_token", ""),
        **kwargs,
    )
    if case.get("continue_final_message"):
        final_message = conv[-1]["content"]
        if final_message.strip() not in rendered:
            raise ValueError("continue_final_message is set but the final message does not appear in the chat")
        loc = rendered.rindex(final_message.strip())
        if rendered[loc : loc + len(final_message.lstrip())] == final_message:
            rendered = rendered[: loc + len(final_message.lstrip())]
        else:
            rendered = rendered[: loc + len(final_message.strip())]
    return rendered


def main():
    req = json.load(sys.stdin)
    out = {}
    for case in req["cases"]:
        try:
            out[case["name"]] = {"output": render(req["template"], case)}
        except Exception as e:  # noqa: BLE001 - every failure is a result
            out[case["name"]] = {"error": str(e)}
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    assert jinja2.__version__
    main()
