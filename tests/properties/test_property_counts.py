"""Every property asserts how many cases it ran (issue 36 item 5): conftest's `counts_cases` checks the count in the
property's own test, so a property that ran nothing, or fewer cases than it says, fails, whatever the test order."""

from __future__ import annotations

import pytest
from conftest import counts_cases
from hypothesis import given, settings
from hypothesis import strategies as st


def test_a_property_counts_the_cases_it_ran():
    @counts_cases()
    @settings(max_examples=7, database=None)
    @given(st.integers())
    def drawn(number):
        assert isinstance(number, int)

    drawn()
    assert len(drawn.cases) == 7


def test_a_property_that_ran_fewer_cases_than_it_says_fails():
    @counts_cases(at_least=10)
    @settings(max_examples=10, database=None)
    @given(st.booleans())  # two cases in all: Hypothesis stops there
    def drawn(flag):
        assert flag in (True, False)

    with pytest.raises(AssertionError, match="the property ran 2 cases, not at least 10"):
        drawn()


def test_a_property_whose_body_is_never_called_fails():
    @counts_cases()
    @settings(max_examples=5, database=None)
    @given(st.integers())
    def drawn(number):
        pass

    drawn.__wrapped__.hypothesis.inner_test = lambda number: None  # a property whose cases all went elsewhere
    with pytest.raises(AssertionError, match="the property ran 0 cases, not at least 5"):
        drawn()


def test_settings_put_above_the_count_are_refused():
    """@settings above @counts_cases would set the wrapper's settings, not the property's: refused by name."""

    @settings(max_examples=3, database=None)
    @counts_cases()
    @given(st.integers())
    def drawn(value):
        pass

    with pytest.raises(AssertionError, match="put @counts_cases\\(\\) above @settings and @seed on drawn"):
        drawn()
