"""Reading elb's YAML config text strictly, with errors that give a place but never the content.

PyYAML's ``SafeLoader``, subclassed, because PyYAML is already a dependency (Ansible's too) and
a few small overrides give what a config file needs: a duplicate key is an error (PyYAML keeps
the last value silently), aliases are refused (an alias bomb, "billion laughs", expands to
gigabytes when the data is walked), tags that make values JSON cannot carry are refused
(timestamps stay strings), and so are numbers in YAML 1.1's surprising forms (``0x10``, ``017``,
``1_000``, ``+5``, ``1:30``), which read as another number than the one meant. ``ruamel.yaml``
refuses duplicates but expands aliases and would be a new dependency; ``strictyaml`` reads every
value as a string and would need a schema of its own beside the pydantic model. PyYAML's own
error text quotes the offending line, which may hold a secret, so errors are rebuilt here from
the problem and its position only.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_BYTES = 1 << 20  # a config is a few KiB; a bigger file is a mistake, not a config
MAX_DEPTH = 64  # nesting deeper than this is refused before Python's recursion limit is near


class YamlFileError(Exception):
    """The text is not acceptable YAML; the message gives line, column and the kind of error."""


def _where(line: int, column: int) -> str:
    return f"line {line + 1}, column {column + 1}"


class Refused(ConstructorError):
    """Something elb's config does not allow; the message is elb's own (nothing from the file)."""

    def __init__(self, problem: str, mark: yaml.Mark) -> None:
        super().__init__(None, None, problem, mark)


class StrictLoader(yaml.SafeLoader):
    """SafeLoader without duplicate keys, aliases, values JSON cannot carry, or numbers in
    YAML 1.1's surprising forms (``0x10``, ``017``, ``1_000``, ``+5``, ``1:30``)."""

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise Refused("aliases (*name) are not allowed in elb's config: write the value out", event.start_mark)
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise Refused(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, object]:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise Refused("merge keys (<<) are not allowed in elb's config", key_node.start_mark)
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # unhashable: SafeLoader reports it below
            if first is not None:
                raise Refused(f"duplicate key {_key_name(key)} (first at line {first + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)

    def _refuse_tag(self, node: Node) -> object:
        raise Refused(f"values tagged !!{node.tag.rsplit(':', 1)[-1]} are not allowed in elb's config", node.start_mark)


_PLAIN_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_PLAIN_FLOAT = re.compile(r"-?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+][0-9]+)?|-?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")


def _plain_int(loader: StrictLoader, node: Node) -> int:
    """An integer in plain decimal digits. YAML 1.1 also reads ``0x10`` (16), ``017`` (15),
    ``0b11``, ``1_000``, ``+5`` and ``1:30`` (90) as integers: a value meant otherwise (a mode, a
    version, a time) would silently become another number, so those forms are refused."""
    assert isinstance(node, ScalarNode)
    if _PLAIN_INT.fullmatch(node.value) is None:
        raise Refused(
            "an integer in another form than plain decimal digits (hexadecimal 0x10, octal 017, binary 0b1, "
            "1_000, +5, base 60 1:30) is not allowed: write the decimal number, or quote it to keep it as text",
            node.start_mark,
        )
    return int(node.value)


def _plain_float(loader: StrictLoader, node: Node) -> object:
    """A float as JSON could write it (``1.5``, ``-2.0e+3``, ``.inf``): no ``_``, ``+`` or base 60."""
    assert isinstance(node, ScalarNode)
    if _PLAIN_FLOAT.fullmatch(node.value) is None:
        raise Refused(
            "a number written with _, a leading + or in base 60 (1:30.5) is not allowed: write it plainly "
            "(1000.5), or quote it to keep it as text",
            node.start_mark,
        )
    return loader.construct_yaml_float(node)


def _timestamp_as_text(loader: StrictLoader, node: Node) -> str:
    """A date stays the text it was written as (JSON, and so Ansible's extra vars, have no dates)."""
    assert isinstance(node, ScalarNode)
    return loader.construct_scalar(node)


StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)
StrictLoader.add_constructor("tag:yaml.org,2002:int", _plain_int)
StrictLoader.add_constructor("tag:yaml.org,2002:float", _plain_float)
for _tag in ("binary", "set", "omap", "pairs"):
    StrictLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", StrictLoader._refuse_tag)


def _key_name(key: object) -> str:
    text = str(key)
    return repr(text) if len(text) <= 64 else repr(text[:61] + "...")


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_TOKEN = re.compile(r"'<[a-z ]+>'")  # PyYAML's names of token kinds, such as '<block end>'


def _problem(text: str | None) -> str:
    """PyYAML's description of a problem, with any quoted text left out (it comes from the file)
    except a single character or escape, and the names of token kinds."""
    if not text:
        return "not valid YAML"
    return _QUOTED.sub(
        lambda m: m.group(0) if len(m.group(0)) <= 4 or _TOKEN.fullmatch(m.group(0)) else "(...)", text.strip()
    )


def _bad_character(text: str, err: yaml.reader.ReaderError) -> str:
    before = text[: err.position]
    line = before.count("\n")
    column = len(before) - (before.rfind("\n") + 1)
    return f"{_where(line, column)}: a control character (not allowed in YAML)"


def _describe(err: yaml.MarkedYAMLError) -> str:
    """``line L, column C: problem (context at line L, column C)``, without the file's text."""
    mark = err.problem_mark or err.context_mark
    text = _problem(err.problem or err.context)
    if mark is not None:
        text = f"{_where(mark.line, mark.column)}: {text}"
    if err.problem and err.context and err.context_mark is not None:
        text += f" ({_problem(err.context)} at {_where(err.context_mark.line, err.context_mark.column)})"
    return text


@dataclass(frozen=True)
class Document:
    """Loaded data, and the node tree it came from (to name the line of a key)."""

    data: object
    root: Node | None

    def position(self, path: Sequence[object]) -> str | None:
        """``line L, column C`` of the deepest key of ``path`` found in the file, or None."""
        node = self.root
        found: Node | None = None
        for part in path:
            if isinstance(node, MappingNode):
                match = next(
                    ((k, v) for k, v in node.value if isinstance(k, ScalarNode) and k.value == str(part)),
                    None,
                )
                if match is None:
                    break
                found, node = match
            elif isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                node = found = node.value[part]
            else:
                break
        if found is None:
            return None
        return _where(found.start_mark.line, found.start_mark.column)


def decode(raw: bytes) -> str:
    """UTF-8 text (a BOM is allowed); the error names the line and column of the first bad byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        before = raw[: err.start]
        line = before.count(b"\n")
        column = len(before) - (before.rfind(b"\n") + 1)
        raise YamlFileError(f"{_where(line, column)}: not UTF-8 text") from None


def load(text: str) -> Document:
    """Parse one YAML document with ``StrictLoader``."""
    try:
        loader = StrictLoader(text)  # the reader checks the characters here
    except yaml.reader.ReaderError as err:
        raise YamlFileError(_bad_character(text, err)) from None
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
        return Document(data, root)
    except Refused as err:
        assert err.problem_mark is not None
        raise YamlFileError(f"{_where(err.problem_mark.line, err.problem_mark.column)}: {err.problem}") from None
    except yaml.MarkedYAMLError as err:
        raise YamlFileError(_describe(err)) from None
    except yaml.reader.ReaderError as err:
        raise YamlFileError(_bad_character(text, err)) from None
    except yaml.YAMLError as err:
        raise YamlFileError(f"not valid YAML ({type(err).__name__})") from None
    finally:
        loader.dispose()
