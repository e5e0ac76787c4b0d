"""tfwb.ui.controls: a control per knob kind (the SIGINT bridge is tested in test_interrupts.py)."""
import html

import ipywidgets as W
import pytest

from tfwb.config import KNOBS
from tfwb.knobs import GROUPS, Knob
from tfwb.ui import controls as C


@pytest.mark.parametrize("knob, value, control, widget", [
    (Knob("bool", "b", group="input"), True, C.ToggleControl, W.Checkbox),
    (Knob("cache", "c", group="input"), "/tmp/x", C.ToggleControl, W.Checkbox),
    (Knob("choice", "c", group="run", choices=("a", "b")), "b", C.ChoiceControl, W.Dropdown),
    (Knob("int", "i", group="run", minimum=1), 3, C.TextControl, W.Text),
    (Knob("float", "f", group="optimizer", minimum=0.0), 0.5, C.TextControl, W.Text),
    (Knob("float", "f", group="input", optional=True, offered=(None, 1.0)), None, C.ChoiceControl, W.Dropdown),
    (Knob("spec", "s", group="optimizer", offered=(None, "a:1")), "a:1", C.ChoiceControl, W.Dropdown),
    (Knob("spec", "s", group="optimizer"), "a:1", C.TextControl, W.Text),
    (Knob("text", "t", group="run"), "hello", C.TextControl, W.Text),
])
def test_each_kind_builds_its_control_and_reads_its_value_back(knob, value, control, widget):
    c = C.build_control("thing", knob, value)
    assert type(c) is control and type(c.widget) is widget
    assert c.read() == value and c.error is None
    assert "tfwb-knob-thing" in c.widget._dom_classes and c.widget.description == "thing"


def test_every_real_knob_with_a_group_builds_and_round_trips_its_default():
    from tfwb.config import RunConfig

    defaults = RunConfig()
    built = C.build_controls(KNOBS, {n: getattr(defaults, n) for n in KNOBS})
    assert set(built) == {n for n, k in KNOBS.items() if k.group}
    for name, c in built.items():
        assert c.read() == getattr(defaults, name), name


def test_text_control_turns_red_on_bad_text_and_names_the_field():
    c = C.build_control("steps", KNOBS["steps"], 40)
    c.widget.value = "forty"
    assert c.widget.value == "forty" and C.INVALID_CLASS in c.widget._dom_classes
    assert "steps='forty'" in c.error
    with pytest.raises(ValueError, match="steps='forty'"):
        c.read()
    c.widget.value = "0"
    assert "steps=0" in c.error
    c.show(12)
    assert c.widget.value == "12" and C.INVALID_CLASS not in c.widget._dom_classes and c.read() == 12


@pytest.mark.parametrize("value", [0.001, 3e-4, 0.00123456789, 1e-05, 2.0, 0.1 + 0.2])
def test_floats_show_as_text_that_reads_back_exactly(value):
    c = C.build_control("learning_rate", KNOBS["learning_rate"], value)
    assert c.read() == value


def test_optional_text_is_none_when_empty_and_shows_what_none_means():
    c = C.build_control("replicas", KNOBS["replicas"], None)
    assert c.widget.value == "" and c.read() is None and c.widget.placeholder == "default"
    c.widget.value = "4"
    assert c.read() == 4


def test_choice_labels_none_by_what_it_means_and_adds_values_not_offered():
    latency = C.build_control("storage_latency_ms", KNOBS["storage_latency_ms"], None)
    assert latency.widget.value == "default" and "25 ms" in [label for label, _ in latency.widget.options]
    latency.show(7.5)
    assert latency.widget.value == "7.5 ms" and latency.read() == 7.5
    clip = C.build_control("clip", KNOBS["clip"], None)
    assert clip.widget.value == "none" and clip.read() is None


def test_cache_toggle_keeps_a_path_until_reset():
    c = C.build_control("cache", KNOBS["cache"], "/data/cache")
    assert c.widget.value is True and c.read() == "/data/cache"
    c.widget.value = False
    assert c.read() is False
    c.widget.value = True
    assert c.read() == "/data/cache"
    c.reset(False)
    c.widget.value = True
    assert c.read() is True


def test_rows_follow_groups_in_order_with_titles():
    from tfwb.config import RunConfig

    built = C.build_controls(KNOBS, {n: getattr(RunConfig(), n) for n in KNOBS})
    rows = C.knob_rows(built, KNOBS)
    groups = [g for g, _, _ in C.grouped(KNOBS)]
    assert groups == [g for g, _ in GROUPS if any(k.group == g for k in KNOBS.values())]
    for row, (group, title, fields) in zip(rows, C.grouped(KNOBS)):
        assert f"tfwb-group-{group}" in row._dom_classes and title in html.unescape(row.children[0].value)
        assert list(row.children[1].children) == [built[f].widget for f in fields]


def test_walk_visits_every_descendant():
    leaf = W.Checkbox()
    box = W.VBox([W.HBox([W.Label("a"), leaf]), W.HTML("b")])
    assert leaf in C.walk(box) and len(C.walk(box)) == 5
