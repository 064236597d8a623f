"""One owner of "better" (tfhydra/record/monitor.py, issue 36 item 2): the Monitor's answers with fake histories, in
milliseconds, and a guard that no other module of tfhydra compares a mode with "max" or "min" itself.

At the top of tests/ rather than in a room's folder: the guard reads every room."""

import ast
import math
from pathlib import Path

import pytest

from tfhydra.record.monitor import MODES, Monitor, is_figure
from tfhydra.record.report import epoch_summary

ROOT = Path(__file__).resolve().parents[2]
OWNER = ROOT / "tfhydra" / "record" / "monitor.py"
HIGHER, LOWER = Monitor("val_accuracy", "max"), Monitor("val_loss", "min")


# ---- the Monitor ------------------------------------------------------------------------------------------------


def test_better_is_strict_and_follows_the_mode():
    assert HIGHER.better(0.9, 0.8) and not HIGHER.better(0.8, 0.9) and not HIGHER.better(0.8, 0.8)
    assert LOWER.better(0.1, 0.2) and not LOWER.better(0.2, 0.1) and not LOWER.better(0.2, 0.2)


@pytest.mark.parametrize("nothing", [None, math.nan, math.inf, -math.inf, True, "0.9"])
def test_a_value_that_is_no_figure_is_never_better_and_any_figure_beats_it(nothing):
    for monitor in (HIGHER, LOWER):
        assert not monitor.better(nothing, 0.5) and monitor.better(0.5, nothing) and not monitor.better(nothing, None)
    assert not is_figure(nothing)


def test_the_best_of_a_history_is_its_value_and_epoch_from_one():
    history = [0.5, 0.9, None, math.nan, 0.7]
    assert HIGHER.best(history) == (0.9, 2)
    assert Monitor("val_accuracy", "min").best(history) == (0.5, 1)
    assert LOWER.best([0.9, 0.4, 0.6]) == (0.4, 2)


def test_ties_without_losses_go_to_the_earliest_epoch():
    assert HIGHER.best([0.5, 0.8, 0.8, 0.8]) == (0.8, 2)
    assert LOWER.best([0.3, 0.2, 0.9, 0.2]) == (0.2, 2)


def test_an_exact_tie_goes_to_the_lower_val_loss_then_the_earlier_epoch():
    """Issue 55: val_accuracy 1.0 from epoch 4 of 6; the epoch that fits validation best is kept, not the first."""
    epochs = [
        {"val_accuracy": 0.7, "val_loss": 0.9},
        {"val_accuracy": 1.0, "val_loss": 0.68},
        {"val_accuracy": 1.0, "val_loss": 0.2},
        {"val_accuracy": 0.9, "val_loss": 0.01},  # the lowest loss, but not tied at the best value
        {"val_accuracy": 1.0, "val_loss": 0.003},
        {"val_accuracy": 1.0, "val_loss": 0.003},  # a full tie: the earlier stays
    ]
    chosen = HIGHER.choose(epochs)
    assert (chosen.value, chosen.epoch) == (1.0, 5)
    assert chosen.tie == {"value": 1.0, "epochs": [2, 3, 5, 6], "kept": 5, "by": "val_loss"}
    assert HIGHER.best_of_epochs(epochs) == (1.0, 5)
    assert HIGHER.best([e["val_accuracy"] for e in epochs], losses=[e["val_loss"] for e in epochs]) == (1.0, 5)


def test_a_tie_the_losses_cannot_break_keeps_the_earliest_and_says_so():
    same = [{"val_accuracy": 0.8, "val_loss": 0.5}, {"val_accuracy": 0.8, "val_loss": 0.5}]
    assert HIGHER.choose(same).tie == {"value": 0.8, "epochs": [1, 2], "kept": 1, "by": "earliest"}
    missing = [{"val_accuracy": 0.8}, {"val_accuracy": 0.8, "val_loss": math.nan}]
    assert HIGHER.choose(missing).epoch == 1 and HIGHER.choose(missing).tie["by"] == "earliest"
    # the monitor is the loss itself: nothing else breaks the tie
    losses = [{"val_loss": 0.3}, {"val_loss": 0.2}, {"val_loss": 0.2}]
    assert LOWER.choose(losses).tie == {"value": 0.2, "epochs": [2, 3], "kept": 2, "by": "earliest"}
    # an earliest epoch with the lowest loss was still chosen by the loss over the other tied one
    assert HIGHER.choose([{"val_accuracy": 1, "val_loss": 0.1}, {"val_accuracy": 1, "val_loss": 0.2}]).tie["by"] == (
        "val_loss"
    )
    assert HIGHER.choose([{"val_accuracy": 0.5}, {"val_accuracy": 0.9}]).tie is None  # no tie: nothing said


def test_better_epoch_is_the_one_rule_of_the_checkpoint_and_early_stopping():
    best = {"val_accuracy": 1.0, "val_loss": 0.5}
    assert HIGHER.better_epoch({"val_accuracy": 1.0, "val_loss": 0.4}, best)
    assert not HIGHER.better_epoch({"val_accuracy": 1.0, "val_loss": 0.5}, best)  # a full tie keeps the earlier
    assert not HIGHER.better_epoch({"val_accuracy": 0.99, "val_loss": 0.0}, best)
    assert HIGHER.better_epoch({"val_accuracy": 0.5}, None) and not HIGHER.better_epoch({}, None)
    assert not HIGHER.better_epoch({"val_accuracy": 1.0 + 1e-9, "val_loss": 1.0}, best, margin=1e-3)  # min_delta
    assert HIGHER.better_epoch({"val_accuracy": 1.0, "val_loss": 0.4}, best, margin=1e-3)  # a tie still breaks
    assert LOWER.better(0.1, 0.2, margin=0.05) and not LOWER.better(0.18, 0.2, margin=0.05)


def test_the_rank_key_breaks_a_tie_between_jobs_by_their_val_loss():
    jobs = [(0.9778, 0.2), (0.9778, 0.1), (0.99, 0.5), (0.9778, None)]
    ranked = sorted(jobs, key=lambda j: HIGHER.rank_key(*j))
    assert ranked == [(0.99, 0.5), (0.9778, 0.1), (0.9778, 0.2), (0.9778, None)]
    assert LOWER.rank_key(0.2, 0.1) == (0.2, math.inf)  # ranked by the loss: nothing else to break with


def test_the_best_from_an_epoch_on_ignores_the_epochs_before_it():
    """Pruning: the epochs before the target sparsity (0-based `from_epoch`) may not be the exported one."""
    history = [0.95, 0.9, 0.6, 0.7]  # the unpruned epochs first: better, but never exported
    assert HIGHER.best(history, from_epoch=2) == (0.7, 4)
    assert LOWER.best(history, from_epoch=2) == (0.6, 3)
    assert HIGHER.best(history, from_epoch=4) == (None, None)  # nothing from there on
    assert HIGHER.best([]) == (None, None) and HIGHER.best([None, math.nan]) == (None, None)


def test_the_best_of_epoch_logs_reads_the_monitored_metric():
    epochs = [{"val_accuracy": 0.5, "val_loss": 0.9}, {}, {"val_accuracy": 0.7, "val_loss": 1.2}]
    assert HIGHER.best_of_epochs(epochs) == (0.7, 3) and LOWER.best_of_epochs(epochs) == (0.9, 1)


def test_the_sort_key_puts_the_best_first_and_the_words_say_which_way():
    assert sorted([0.2, 0.9, 0.5], key=HIGHER.sort_key) == [0.9, 0.5, 0.2]
    assert sorted([0.2, 0.9, 0.5], key=LOWER.sort_key) == [0.2, 0.5, 0.9]
    assert (HIGHER.in_words, LOWER.in_words) == ("higher is better", "lower is better")


def test_a_mode_that_is_neither_is_refused():
    assert MODES == ("min", "max")
    with pytest.raises(ValueError, match="'maximum' is not one of"):
        Monitor("val_accuracy", "maximum")


def test_the_records_best_counts_from_the_settled_epoch_and_stands_in_with_the_last_when_none():
    epochs = [{"val_accuracy": 0.9}, {"val_accuracy": 0.6}, {"val_accuracy": 0.8}, {"val_accuracy": 0.7}]
    assert epoch_summary(epochs, "val_accuracy", "max")["best"] == {"epoch": 1, "val_accuracy": 0.9}
    assert epoch_summary(epochs, "val_accuracy", "max", from_epoch=1)["best"] == {"epoch": 3, "val_accuracy": 0.8}
    assert epoch_summary(epochs, "val_accuracy", "min", from_epoch=2)["best"]["epoch"] == 4
    nan = [{"val_accuracy": math.nan}, {"val_accuracy": None}]
    assert epoch_summary(nan, "val_accuracy", "max")["best"]["epoch"] == 2  # no figure: the last epoch


def test_the_records_best_says_the_tie_it_was_chosen_from():
    epochs = [{"val_accuracy": 1.0, "val_loss": 0.68}, {"val_accuracy": 1.0, "val_loss": 0.003}]
    best = epoch_summary(epochs, "val_accuracy", "max")["best"]
    assert best == {
        "epoch": 2,
        "val_accuracy": 1.0,
        "val_loss": 0.003,
        "tie": {"value": 1.0, "epochs": [1, 2], "kept": 2, "by": "val_loss"},
    }
    assert "tie" not in epoch_summary([{"val_accuracy": 0.5}, {"val_accuracy": 0.6}], "val_accuracy", "max")["best"]


# ---- the guard: nobody else decides "better" ----------------------------------------------------------------------

MODE_WORDS = {"max", "min"}


def mode_comparisons(source: str, filename: str = "<source>") -> list[str]:
    """Where `source` decides by a mode itself: a comparison with the string "max" or "min" (`mode == "max"`,
    `mode in ("min", "max")`), `max if ... else min`, or a `{"max": ..., "min": ...}` table."""
    found = []

    def words(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value} & MODE_WORDS
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(words(e) for e in node.elts)) if node.elts else set()
        return set()

    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Compare) and any(words(o) for o in [node.left, *node.comparators]):
            found.append(f"{where}: compares with {sorted(set().union(*map(words, [node.left, *node.comparators])))}")
        elif (
            isinstance(node, ast.IfExp)
            and {getattr(node.body, "id", None), getattr(node.orelse, "id", None)} == MODE_WORDS
        ):
            found.append(f"{where}: picks max or min by a condition")
        elif isinstance(node, ast.Dict) and len(set().union(set(), *(words(k) for k in node.keys if k))) == 2:
            found.append(f"{where}: a table of max and min")
    return found


def test_the_guard_finds_each_way_of_deciding_by_a_mode():
    """The guard can fail: each spelling of the comparisons it exists to stop is found."""
    for source in (
        'better = value > best if mode == "max" else value < best',
        "word = 'higher' if cfg.monitor_mode == 'max' else 'lower'",
        'ok = mode in ("min", "max")',
        "pick = max if maximize else min",
        'pick = {"max": max, "min": min}[mode]',
        'if "min" != mode: pass',
    ):
        assert mode_comparisons(source), source
    for source in (
        "mode in MODES",
        "choice(*MODES)",
        'pooling = choice("avg", "max")',
        "best = max(values)",
        'mode = cfg.get("mode")',
    ):
        assert mode_comparisons(source) == [], source


# Modules that may hold their own copy of a mode's meaning, each with its reason and a test that it agrees with Monitor
COPIES = {
    # Optuna's default direction resolves where the config is composed, on the ground floor beside the record, which
    # imports config/: an import of the record from config/ would tie the two rooms
    ROOT / "tfhydra" / "config" / "resolvers.py": "test_the_search_direction_resolver_says_what_the_monitor_says",
}


def test_the_search_direction_resolver_says_what_the_monitor_says():
    from tfhydra.config.resolvers import search_direction

    assert [search_direction(mode) for mode in MODES] == [Monitor("val_loss", mode).direction for mode in MODES]
    assert search_direction("sideways") == "sideways"  # left for the pre-flight to name


def test_no_module_but_the_monitor_compares_a_mode_with_max_or_min():
    found = [
        line
        for path in sorted((ROOT / "tfhydra").rglob("*.py")) + sorted((ROOT / "hydra_plugins").rglob("*.py"))
        if path != OWNER and path not in COPIES
        for line in mode_comparisons(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == [], "ask tfhydra.record.monitor.Monitor instead:\n" + "\n".join(found)
