"""The compare table's p-value cell says what its cluster count allows (issue 31 item 4)."""

from personalign._verbs.render import p_cell as _p_cell


def _diff(p, p_min, ci, mde=0.12):
    return {"permutation": {"p_value": p, "p_min": p_min}, "ci": ci, "range": [-0.1, 0.2], "mde": mde}


def test_few_clusters_say_no_test_could_show_a_difference_and_print_no_mde():
    cell = _p_cell(_diff(0.125, 0.125, None))
    assert "too few clusters" in cell and "MDE" not in cell


def test_enough_clusters_print_the_mde_beside_no_difference():
    cell = _p_cell(_diff(0.4, 0.002, [-0.05, 0.1]))
    assert "no difference shown, MDE ±0.12" in cell


def test_a_shown_difference_prints_no_mde():
    assert "MDE" not in _p_cell(_diff(0.01, 0.002, [0.05, 0.2]))
