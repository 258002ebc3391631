"""Config handling for the smoke pipeline: the subset of YAML that
finetune.yaml uses, `${name}` interpolation and `key.sub=value` command-line
overrides, as llm-foundry does them (through OmegaConf) for the real task.

Supported YAML: nested mappings by indentation, block lists (`- item`),
flow lists (`[a, b]`) and `{}`, scalars (ints, floats such as 1.0e-5,
true/false, null or nothing, quoted or plain strings) and `#` comments.
"""

import re

_INTERP = re.compile(r"\$\{([A-Za-z0-9_.]+)\}")


class ConfigError(ValueError):
    pass


def parse_scalar(text):
    """A YAML scalar as Python: None, bool, int, float, list, {} or str."""
    text = text.strip()
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text == "{}":
        return {}
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [parse_scalar(part) for part in inner.split(",")] if inner else []
    if re.fullmatch(r"[-+]?[0-9]+", text):
        return int(text)
    if re.fullmatch(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][-+]?[0-9]+)?", text):
        return float(text)
    return text


def _strip_comment(line):
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def parse_yaml(text, name="<config>"):
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).rstrip()
        if line.strip():
            if "\t" in line[: len(line) - len(line.lstrip())]:
                raise ConfigError(f"{name}:{number}: tabs are not allowed for indentation")
            lines.append((number, len(line) - len(line.lstrip(" ")), line.strip()))
    value, pos = _block(lines, 0, 0 if not lines else lines[0][1], name)
    if pos != len(lines):
        raise ConfigError(f"{name}:{lines[pos][0]}: unexpected indentation")
    return {} if value is None else value


def _block(lines, pos, indent, name):
    if pos >= len(lines):
        return None, pos
    if lines[pos][2].startswith("- ") or lines[pos][2] == "-":
        items = []
        while pos < len(lines) and lines[pos][1] == indent and (lines[pos][2] == "-" or lines[pos][2].startswith("- ")):
            number, _, content = lines[pos]
            rest = content[1:].strip()
            pos += 1
            if rest:
                items.append(parse_scalar(rest))
            else:
                child_indent = lines[pos][1] if pos < len(lines) else indent
                if child_indent <= indent:
                    items.append(None)
                else:
                    child, pos = _block(lines, pos, child_indent, name)
                    items.append(child)
        return items, pos
    mapping = {}
    while pos < len(lines) and lines[pos][1] == indent:
        number, _, content = lines[pos]
        match = re.fullmatch(r"([^:]+?)\s*:(\s+(.*))?", content) or re.fullmatch(r"([^:]+?):()()", content)
        if not match:
            raise ConfigError(f"{name}:{number}: expected `key: value`, got {content!r}")
        key, rest = match.group(1).strip(), (match.group(3) or "").strip()
        pos += 1
        if rest:
            mapping[key] = parse_scalar(rest)
        elif pos < len(lines) and lines[pos][1] > indent:
            mapping[key], pos = _block(lines, pos, lines[pos][1], name)
        elif pos < len(lines) and lines[pos][1] == indent and lines[pos][2].startswith("- "):
            mapping[key], pos = _block(lines, pos, indent, name)  # list at the key's indentation
        else:
            mapping[key] = None
    return mapping, pos


def set_path(config, dotted, value):
    node = config
    parts = dotted.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value


def get_path(config, dotted, default=None):
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def apply_overrides(config, overrides):
    """`key.sub=value` arguments, as OmegaConf's from_cli."""
    for arg in overrides:
        if "=" not in arg:
            raise ConfigError(f"override {arg!r} is not of the form key=value")
        key, value = arg.split("=", 1)
        set_path(config, key.strip(), parse_scalar(value))
    return config


def resolve(config):
    """Replaces `${a.b}` by the value at that path of the whole config."""

    def walk(node, seen):
        if isinstance(node, dict):
            return {k: walk(v, seen) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        if isinstance(node, str):
            whole = _INTERP.fullmatch(node)
            if whole:
                return lookup(whole.group(1), seen)
            return _INTERP.sub(lambda m: str(lookup(m.group(1), seen)), node)
        return node

    def lookup(path, seen):
        if path in seen:
            raise ConfigError(f"interpolation loop at ${{{path}}}")
        marker = object()
        value = get_path(config, path, marker)
        if value is marker:
            raise ConfigError(f"${{{path}}}: no such key in the config")
        return walk(value, seen | {path})

    return walk(config, frozenset())


def load(path, overrides=()):
    with open(path) as f:
        config = parse_yaml(f.read(), path)
    apply_overrides(config, overrides)
    return resolve(config)


def parse_duration(value, unit_default="ep"):
    """'2ep', '30ba', 1 -> (number, unit) with unit 'ep' or 'ba'."""
    if isinstance(value, bool):
        raise ConfigError(f"bad duration {value!r}")
    if isinstance(value, int):
        return value, unit_default
    match = re.fullmatch(r"\s*([0-9]+)\s*(ep|ba)\s*", str(value))
    if not match:
        raise ConfigError(f"bad duration {value!r} (expected e.g. 2ep or 30ba)")
    return int(match.group(1)), match.group(2)
