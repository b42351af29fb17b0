"""The packages' import rules (docs/architecture.md, each package's ``__init__``), read from the
source with ``ast``: every import counts, at the top, inside a function or under
``TYPE_CHECKING``.

- ``elb.core`` imports no other package of elb;
- ``elb.provision`` imports only ``elb.core``;
- ``elb.schedulers`` and ``elb.clouds`` import neither ``elb.service`` nor ``elb.cli`` (nor each
  other);
- ``elb.service`` does not import ``elb.cli``;
- ``elb.simulate`` imports ``elb.core`` and ``elb.schedulers`` only (``elb.cli`` loads it by name);
- a scheduler driver never imports another, not even through a module they share (a driver
  loads only its own code, the core and what the drivers share); nor does a cloud;
- nothing in ``elb`` imports ``elbdev`` (the development package, not in the wheel), not even by
  name (``importlib``);
- no two modules import each other, directly or through others (imports under ``TYPE_CHECKING``
  count too: a module that needs another's types for its annotations does not also serve it);
- ``elb.core``'s code names no scheduler, no scheduler's command and no cloud (its strings other
  than docstrings, its names and attributes), except where it names them by design: each one's
  config section (``elb.core.config``) and the registry of names; the spot interruptions' path
  (``interruptions``, ``noticeplan``) does not even in its docs;
- nothing in ``elb`` outside the registry (``elb.core.registry``, ``elb.core.drivers``), the
  drivers (``elb.schedulers``) and the adapters (``elb.clouds``) compares a config's scheduler or
  cloud (``scheduler``, ``provider``) with a registered name (``== "slurm"``, ``in ("sge", ...)``,
  ``case "ec2"``): what differs by scheduler or cloud is asked of its module.

The standard library's ``ast`` rather than grimp: who imports whom among our own files is a
walk over their imports, and the test then needs no extra package in either virtualenv.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from elb.cli.main import build_parser
from elb.core.registry import CLOUDS, SCHEDULERS

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("elb", "elbdev")
DEV_MODULE = re.compile(r"elbdev(\.\w+)*")
# package -> the packages of elb (besides itself and the root ``elb``) it must not import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "elb.core": ("elb.schedulers", "elb.clouds", "elb.provision", "elb.service", "elb.cli", "elb.simulate", "elbdev"),
    "elb.provision": ("elb.schedulers", "elb.clouds", "elb.service", "elb.cli", "elb.simulate", "elbdev"),
    "elb.schedulers": ("elb.clouds", "elb.service", "elb.cli", "elb.simulate", "elbdev"),
    "elb.clouds": ("elb.schedulers", "elb.service", "elb.cli", "elb.simulate", "elbdev"),
    "elb.service": ("elb.cli", "elb.simulate", "elbdev"),
    "elb.simulate": ("elb.cli", "elb.service", "elb.clouds", "elb.provision", "elbdev"),
    # a driver imports the core and what the drivers share, never another driver
    "elb.schedulers.sge": ("elb.schedulers.slurm",),
    "elb.schedulers.slurm": ("elb.schedulers.sge",),
    "elb": ("elbdev",),
}


def modules() -> dict[str, Path]:
    out = {}
    for top in PACKAGES:
        for path in sorted((REPO / top).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imported(module: str, path: Path, known: dict[str, Path], typing: bool) -> Iterator[tuple[str, int]]:
    """The modules of ``known`` that ``module`` imports, with the line of each import (``typing``:
    those under ``TYPE_CHECKING`` too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for_checker = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if not typing and id(node) in for_checker:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub if sub in known else base), node.lineno


def graph(typing: bool = True) -> dict[str, dict[str, int]]:
    known = modules()
    return {
        m: {dep: line for dep, line in imported(m, p, known, typing) if dep in known and dep != m}
        for m, p in known.items()
    }


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_packages_import_only_what_their_rules_allow() -> None:
    broken = []
    for module, deps in graph().items():
        for package, forbidden in FORBIDDEN.items():
            if not within(module, package):
                continue
            for dep, line in deps.items():
                if any(within(dep, f) for f in forbidden):
                    broken.append(f"{module}:{line} imports {dep} ({package} must not import it)")
    assert broken == []


def test_elb_names_no_module_of_elbdev_even_as_a_string() -> None:
    named = [
        f"{p.relative_to(REPO)}:{node.lineno}: {node.value}"
        for p in sorted((REPO / "elb").rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and DEV_MODULE.fullmatch(node.value)
    ]
    assert named == []


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    assert cycles(graph(typing=True)) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


# A scheduler, a scheduler's command or a cloud, by name (``slurm`` in lower case is also a
# policy's name, ``policy.name: slurm``, and is left out).
NAMING = re.compile(
    r"\b(SGE|sge|Grid Engine|qstat|qmod|qalter|qconf|qhost|qsub"
    r"|Slurm|scontrol|squeue|sinfo|sbatch|EC2|ec2|AWS|aws|boto3)\b"
)
NAMES_THEM = ("elb.core.registry",)  # the names, and the modules serving them
NEUTRAL_DOCS = ("elb.core.interruptions", "elb.core.noticeplan")


def code_words(source: str) -> Iterator[tuple[int, str]]:
    """The words of a module's code, with their lines: its strings other than docstrings, the
    names it defines and uses, attributes and arguments (comments are not code)."""
    tree = ast.parse(source)
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value
        elif isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.arg):
            yield node.lineno, node.arg
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.lineno, node.name


def test_the_cores_code_names_no_scheduler_and_no_cloud() -> None:
    named = [
        f"{m}:{line}: {word!r}"
        for m, path in modules().items()
        if within(m, "elb.core") and m not in NAMES_THEM
        for line, word in code_words(path.read_text(encoding="utf-8"))
        if NAMING.search(word)
    ]
    assert named == []


# The types a scheduler's or a cloud's settings are written in (Grid Engine's queue and host group
# names, EC2's instance types and launch templates): with their sections, in their drivers'
# packages, never in the core's model of a node group, which holds the fields all share.
OWN_TYPES = re.compile(r"\b(QueueName|HostgroupName|InstanceType|LaunchTemplate)\b")
# The models of the shipped schedulers' and clouds' own settings: each its driver's ``CONFIG_SECTION``.
SECTIONS = re.compile(r"\b(SgeConfig|SlurmConfig|Ec2Config|LocalConfig|ROOT_VOLUME_GIB)\b")
NEUTRAL_GROUPS = ("elb.core.groups", "elb.core.groupoptions")


@pytest.mark.parametrize("module", NEUTRAL_GROUPS)
def test_the_cores_node_group_model_holds_no_scheduler_or_cloud_type(module: str) -> None:
    text = modules()[module].read_text(encoding="utf-8")
    named = [f"{module}:{line}: {word!r}" for line, word in code_words(text) if OWN_TYPES.search(word)]
    assert named == []


def test_the_core_mentions_no_schedulers_or_clouds_section_even_in_its_docs() -> None:
    """Each shipped scheduler's and cloud's settings are its driver's ``CONFIG_SECTION``, in its
    package, read as a registered one's: the core names neither their models nor their types."""
    named = [
        f"{m}:{n}: {hit.group(0)!r}"
        for m, path in modules().items()
        if within(m, "elb.core")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for hit in (SECTIONS.search(line) or OWN_TYPES.search(line),)
        if hit is not None
    ]
    assert named == []


def test_the_word_finder_finds_names_in_code_and_not_in_docstrings() -> None:
    source = (
        '"""Grid Engine."""\n\ndef f(sge: int) -> str:\n    """qalter -l."""\n    return cfg.cloud.ec2 or "qmod -rq"\n'
    )
    found = [(line, word) for line, word in code_words(source) if NAMING.search(word)]
    assert sorted(found) == [(3, "sge"), (5, "ec2"), (5, "qmod -rq")]


@pytest.mark.parametrize("module", NEUTRAL_DOCS)
def test_the_spot_interruptions_path_names_no_scheduler_and_no_cloud_even_in_its_docs(module: str) -> None:
    text = modules()[module].read_text(encoding="utf-8")
    assert sorted({m.group(0) for m in NAMING.finditer(text)}) == []


def test_nothing_but_the_entry_points_at_elbs_top_level() -> None:
    top = sorted(p.name for p in (REPO / "elb").glob("*.py"))
    assert top == ["__init__.py", "__main__.py"]


@pytest.mark.parametrize("package", sorted(m for m, p in modules().items() if p.name == "__init__.py"))
def test_every_package_says_what_it_holds_and_may_import(package: str) -> None:
    doc = ast.get_docstring(ast.parse(modules()[package].read_text(encoding="utf-8")))
    assert doc and "import" in doc.lower(), f"{package}: its docstring says what lives there and what it may import"


def test_elbs_help_lists_the_admins_verbs_only() -> None:
    shown = build_parser().format_help()
    assert "testcluster" not in shown and "demo" not in shown
    assert all(verb in shown for verb in ("run", "once", "status", "validate"))


def loaded_by(module: str, edges: dict[str, dict[str, int]]) -> set[str]:
    """Every module ``module`` loads, through any chain of imports."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for dep in edges.get(todo.pop(), {}):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


@pytest.mark.parametrize(
    ("driver", "other"),
    [("elb.schedulers.sge.driver", "elb.schedulers.slurm"), ("elb.schedulers.slurm.driver", "elb.schedulers.sge")],
)
def test_a_driver_loads_no_other_driver(driver: str, other: str) -> None:
    loaded = loaded_by(driver, graph(typing=False))
    assert sorted(m for m in loaded if within(m, other)) == []


@pytest.mark.parametrize(
    ("cloud", "other"), [("elb.clouds.ec2.entry", "elb.clouds.local"), ("elb.clouds.local", "elb.clouds.ec2")]
)
def test_a_cloud_loads_no_other_cloud(cloud: str, other: str) -> None:
    """The local cloud takes EC2's keys of a node group with a model of its own, not EC2's."""
    loaded = loaded_by(cloud, graph(typing=True))
    assert sorted(m for m in loaded if within(m, other)) == []


# Where a scheduler's or a cloud's name may be compared: the registry, the drivers, the adapters.
COMPARES_NAMES = ("elb.core.registry", "elb.core.drivers", "elb.schedulers", "elb.clouds")
NAMED = re.compile(r"scheduler|provider")  # what a config or a command line calls them


def _names_in(node: ast.expr) -> set[str]:
    """The strings of a constant or of a literal tuple, list or set of constants."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_names_in(e) for e in node.elts)) if node.elts else set()
    return set()


def _says_which(node: ast.expr) -> bool:
    """``cfg.scheduler``, ``cfg.cloud.provider``, ``args.scheduler``, ``scheduler``: an expression
    whose last name says it holds a scheduler's or a cloud's name."""
    last = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return bool(NAMED.search(last))


def name_comparisons(source: str, names: set[str]) -> Iterator[tuple[int, str]]:
    """Where ``source`` compares a scheduler's or a cloud's name (an expression ``_says_which``)
    with one of ``names``: ``==``, ``!=``, ``in``, ``not in``, and ``match``'s ``case``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_says_which(x) for x in sides):
                yield from ((node.lineno, n) for x in sides for n in sorted(_names_in(x) & names))
        elif isinstance(node, ast.Match) and _says_which(node.subject):
            for case in node.cases:
                for m in ast.walk(case.pattern):
                    if isinstance(m, ast.MatchValue):
                        yield from ((m.lineno, n) for n in sorted(_names_in(m.value) & names))


def test_only_the_registry_the_drivers_and_the_adapters_compare_a_scheduler_or_a_cloud_by_name() -> None:
    names = set(SCHEDULERS) | set(CLOUDS)
    compared = [
        f"{m}:{line}: {name!r}"
        for m, path in modules().items()
        if within(m, "elb") and not any(within(m, p) for p in COMPARES_NAMES)
        for line, name in name_comparisons(path.read_text(encoding="utf-8"), names)
    ]
    assert compared == []


def test_the_comparison_finder_finds_each_way_of_comparing_a_name() -> None:
    source = (
        'if cfg.scheduler == "slurm":\n    pass\n'
        'ok = "ec2" != cfg.cloud.provider\n'
        'ok = args.scheduler in ("sge", "memq", "auto")\n'
        'match cfg.scheduler:\n    case "sge":\n        pass\n'
        'ok = args.scheduler == "auto" or policy.name == "slurm" or c.ansible_connection == "local"\n'
    )
    found = sorted(name_comparisons(source, {"sge", "slurm", "ec2", "local"}))
    assert found == [(1, "slurm"), (3, "ec2"), (4, "sge"), (6, "sge")]
