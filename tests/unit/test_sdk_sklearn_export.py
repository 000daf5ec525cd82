"""`dpfit.sklearn_export`: the one-vs-rest estimator of an exported multiclass model is a
scikit-learn classifier like any other (``score`` is the method), and pickles written before
its ``link`` parameter still load."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from dpfit.sklearn_export import OneVsRestLinear, _binary

WEIGHTS = np.array([[1.0, -2.0], [-1.0, 0.5], [0.2, 0.3]])
X = np.array([[0.5, 0.1], [-0.3, 0.4], [0.0, -0.6], [0.2, 0.2]])


def one_vs_rest(link: str) -> OneVsRestLinear:
    return OneVsRestLinear(
        estimators=[_binary("huber_svm", w, [0, 1]) for w in WEIGHTS],
        classes=["a", "b", "c"],
        link=link,
    )


@pytest.mark.parametrize("link", ["logistic", "hinge"])
def test_score_is_the_mean_accuracy(link: str) -> None:
    estimator = one_vs_rest(link)
    predicted = estimator.predict(X)
    assert estimator.score(X, predicted) == 1.0
    wrong = np.where(predicted == "a", "b", "a")
    assert estimator.score(X, wrong) == 0.0
    assert estimator.get_params()["link"] == link


def test_a_pickle_from_before_link_loads_with_its_scores() -> None:
    """dpfit 0.2.0 stored the link as the attribute ``score`` (hiding the method)."""
    old = one_vs_rest("hinge")
    state = dict(old.__dict__)
    state["score"] = state.pop("link")
    old.__dict__.clear()
    old.__dict__.update(state)
    loaded = pickle.loads(pickle.dumps(old))
    assert loaded.link == "hinge" and "score" not in loaded.__dict__
    np.testing.assert_allclose(loaded.predict_proba(X), one_vs_rest("hinge").predict_proba(X))
    assert loaded.score(X, loaded.predict(X)) == 1.0


def test_to_sklearn_without_scikit_learn_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`make serve` installs the client without its sklearn extra: the error names it."""
    from dpfit.model import Model

    monkeypatch.setitem(__import__("sys").modules, "sklearn", None)  # import sklearn fails
    with pytest.raises(ImportError, match=r"pip install 'dpfit-client\[sklearn\]'"):
        Model.to_sklearn(None)  # type: ignore[arg-type]  # fails before it reads the model
