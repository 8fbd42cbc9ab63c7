"""The lineage tree of a task: from its seed through what each simulator version wrote from it.

``l`` on the tasks screen (or on a batch's tasks) opens `LineageScreen` on the selected task. A thread worker reads
`genenv_engine.storage.store.Store.lineage_tree` (the task's first stored ancestor and every task descended from it) and
posts `LineageRead`; the screen draws it as a Textual `Tree`: under each task, its children grouped by who wrote
them (the simulator version and epoch, or a hand edit), each task labelled with its p̂, the simulator version that
wrote it, the validator's verdict and its prompt. ``enter`` on a task closes the screen and asks the app to show that
task in the tasks screen (`genenv_console.messages.OpenTask`); the cursor starts on the task the screen was opened
for. The grouping is a plain function (`writer_groups`) that tests read directly; every label is a rich `Text` of
sanitised text.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, Tree
from textual.widgets.tree import TreeNode

from genenv_console.data import fmt
from genenv_console.messages import LineageRead, OpenTask
from genenv_console.safe import clean, safe_text
from genenv_console.screens.base import DrillModal, verdict
from genenv_engine.storage.store import GENERATED_ORIGINS, LINEAGE_NODES


def writer(node: dict[str, Any]) -> tuple[tuple[int, int, str], str]:
    """Who wrote a task, as (sort key, label): the simulator version and epoch of a generated (or static) task,
    else its origin and epoch.

    >>> writer({"simulator_version": 2, "epoch": 3, "origin": "generated"})[1]
    'simulator v2 · epoch 3'
    >>> writer({"simulator_version": 0, "generator": "hand-edit", "epoch": 1, "origin": "edited"})[1]
    'edited · epoch 1'
    """
    epoch = node.get("epoch") or 0
    if node.get("simulator_version") is not None and node.get("origin") in GENERATED_ORIGINS:
        return (epoch, node["simulator_version"], ""), f"simulator v{node['simulator_version']} · epoch {epoch}"
    origin = node.get("origin") or "?"
    return (epoch, -1, origin), f"{clean(origin, 30, one_line=True)} · epoch {epoch}"


def writer_groups(nodes: list[dict[str, Any]]) -> dict[str, list[tuple[str, list[dict[str, Any]]]]]:
    """Each task's children (by ``parent_id``) grouped by `writer`, groups and children in order (epoch, version;
    id): ``{parent id: [(writer label, [child, ...]), ...]}``.

    >>> g = {"origin": "generated"}
    >>> nodes = [{"id": "s", "parent_id": None}, {"id": "a", "parent_id": "s", "simulator_version": 0, "epoch": 1, **g},
    ...          {"id": "b", "parent_id": "s", "simulator_version": 1, "epoch": 2, **g},
    ...          {"id": "c", "parent_id": "s", "simulator_version": 0, "epoch": 1, **g}]
    >>> [(label, [c["id"] for c in kids]) for label, kids in writer_groups(nodes)["s"]]
    [('simulator v0 · epoch 1', ['a', 'c']), ('simulator v1 · epoch 2', ['b'])]
    """
    ids = {n["id"] for n in nodes}
    grouped: dict[str, dict[tuple, tuple[str, list[dict[str, Any]]]]] = {}
    for n in nodes:
        parent = n.get("parent_id")
        if parent in ids and parent != n["id"]:
            key, label = writer(n)
            grouped.setdefault(parent, {}).setdefault(key, (label, []))[1].append(n)
    return {
        parent: [(label, sorted(kids, key=lambda k: k["id"])) for _, (label, kids) in sorted(groups.items())]
        for parent, groups in grouped.items()
    }


def node_label(node: dict[str, Any]) -> Text:
    """A task's line in the tree: id, p̂, the simulator version that wrote it, verdict and prompt (all literal)."""
    out = Text(clean(node["id"], 60, one_line=True), style="bold cyan")
    out.append(f"  p̂ {fmt(node.get('p_hat'))}", style="bold")
    if node.get("simulator_version") is not None:
        out.append(f"  sim v{node['simulator_version']}")
    out.append(f"  {clean(verdict(node), 40, one_line=True)}", style="green" if node.get("valid") else "red")
    out.append(f"  {clean(node.get('prompt'), 80, one_line=True)}", style="dim")
    return out


def group_label(label: str, kids: list[dict[str, Any]]) -> Text:
    """A writer group's line: who wrote the tasks, how many, how many valid and their mean p̂."""
    p_hats = [k["p_hat"] for k in kids if k.get("p_hat") is not None]
    mean = f", mean p̂ {sum(p_hats) / len(p_hats):.2f}" if p_hats else ""
    valid = sum(bool(k.get("valid")) for k in kids)
    return Text(f"{label}: {len(kids)} task{'s' * (len(kids) != 1)}, {valid} valid{mean}", style="italic")


class LineageScreen(DrillModal):
    """A seed task and its descendants as a tree; ``enter`` on a task opens it in the tasks screen."""

    DEFAULT_CSS = """
    LineageScreen Tree { height: 1fr; }
    """

    def __init__(self, store: Any, task_id: str) -> None:
        super().__init__()
        self.store, self.task_id = store, task_id
        self.nodes: list[dict[str, Any]] = []
        self.tree_nodes: dict[str, TreeNode] = {}
        """The tree's node of each task id shown."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(safe_text(f"reading the lineage of {self.task_id}…", 200, one_line=True), id="drill-title")
            tree: Tree[str | None] = Tree(Text("…"), id="lineage-tree")
            tree.auto_expand = False
            yield tree

    def on_mount(self) -> None:
        self.query_one(Tree).focus()
        self.read_lineage()

    @work(thread=True, exclusive=True, exit_on_error=False, group="lineage-read")
    def read_lineage(self) -> None:
        """Read the lineage tree in a thread; post `LineageRead` (with the error, if the read failed)."""
        self.post_read(lambda: self.store.lineage_tree(self.task_id), LineageRead, [], "cannot read the lineage")

    @on(LineageRead)
    def _read(self, message: LineageRead) -> None:
        message.stop()
        title = self.query_one("#drill-title", Label)
        if message.error or not message.nodes:
            title.update(safe_text(f"✘ {message.error or f'no task {self.task_id}'}", 500, one_line=True))
            return
        self.nodes = message.nodes
        tree = self.query_one(Tree)
        root = self.nodes[0]
        tree.reset(node_label(root), root["id"])
        self.tree_nodes = {root["id"]: tree.root}
        groups = writer_groups(self.nodes)
        self._add_children(tree.root, root["id"], groups)
        tree.root.expand()
        versions = {n["simulator_version"] for n in self.nodes if n.get("simulator_version") is not None}
        more = f" (the first {LINEAGE_NODES})" if len(self.nodes) >= LINEAGE_NODES else ""
        title.update(
            safe_text(
                f"lineage of {root['id']}: {len(self.nodes) - 1} descendants{more}, {len(versions)} simulator version"
                f"{'s' * (len(versions) != 1)} · ⏎ open in the tasks screen · space fold · escape closes",
                400,
                one_line=True,
            )
        )
        target = self.tree_nodes.get(self.task_id)
        if target is not None:
            self.call_after_refresh(tree.move_cursor, target)

    def _add_children(self, node: TreeNode, task_id: str, groups: dict[str, list]) -> None:
        for label, kids in groups.get(task_id, []):
            group = node.add(group_label(label, kids), None, expand=True)
            for kid in kids:
                if kid["id"] in self.tree_nodes:  # a parent_id cycle: each task once
                    continue
                if kid["id"] in groups:
                    child = group.add(node_label(kid), kid["id"], expand=True)
                else:
                    child = group.add_leaf(node_label(kid), kid["id"])
                self.tree_nodes[kid["id"]] = child
                self._add_children(child, kid["id"], groups)

    @on(Tree.NodeSelected, "#lineage-tree")
    def _selected(self, event: Tree.NodeSelected) -> None:
        event.stop()
        if event.node.data is not None:
            self.app.post_message(OpenTask(event.node.data))
            self.dismiss(None)
