r"""``auto``: the optimizer and hyper-parameters chosen from public facts only.

An analyst who names no optimizer (or ``{"name": "auto"}``) gets the catalog's best choice for
the public facts of the job — n, the encoded dimension d, the declared bounds (every row has
‖x‖₂ ≤ 1), the target (ε, δ), the model's family and its constants (L, β, μ, convexity) and the
label type. Nothing here reads data. The resolved job is an ordinary job of the chosen optimizer
(same plan, same accounting, same charge); the choice is recorded in the plan under ``auto``
(``chosen_by``, ``rule``, what was filled in), which the analyst sees.

The rule (first candidate whose plan is feasible wins):

0. A categorical label (K declared classes) with ``logistic_regression`` whose analyst set
   neither ``gradient_clip`` nor l1 > 0 → one joint ``multinomial_logistic_regression`` fit
   with ``gradient_clip`` = 1/2 (:func:`prefers_joint`), planned by the steps below over its
   K·d' parameters; the record says ``"multiclass": "joint"`` (``"one_vs_rest"`` otherwise).
   From K = 3 on, a joint model whose analyst did not set ``gradient_norm_clip`` gets the
   per-row norm clip B = C·√(K/(K − 1)) (:func:`joint_norm_clip`; L = B instead of √2·C) for
   ``dp_agd_averaged``, ``dp_agd`` and ``dp_gd``. Evidence in ``kits/joint_rule.py``.
1. δ = 0 (pure ε) → ``output_perturbation_gd`` (the catalog's pure ε-DP full-gradient method).
2. δ > 0, non-convex loss → ``dp_gd`` (its PL/non-convex guarantees: Wang, Ye & Xu 2017).
3. δ > 0, convex loss, n ≥ 10,000 and n·ε < 5,000 → ``dp_agd`` at its theory defaults
   (T where the accelerated rate meets the noise floor, η = 1/β_F, R = √(2·gap/μ)).
4. δ > 0, convex loss otherwise → ``dp_agd_averaged``: the same noisy accelerated steps (same
   mechanism, same charge), 2× dp_agd's default T but at most 400 (its compute cap,
   ``STEP_CAP``), releasing the mean of the second half of the iterates — or, for a loss with
   a coefficient anchor (``logistic_regression``) and l1 = 0 when n·ε/K ≥ 2,500 (K classes
   one-vs-rest, 1 otherwise), ``dp_agd_centred``: the same steps and average, but each step
   releases the gradient centred on its label term (half the sensitivity) and the label term
   is released once and soft-thresholded (its docstring). Evidence (public data only,
   ``python -m bench auto-alternatives``): +0.21 / +0.29 / +0.22 points on the Adult-TRAIN
   split at ε = 0.5 / 1 / 2 (n·ε ≥ 10,000). Below the gate the one-shot label term is too
   noisy to pay (60 seeds each, centred − averaged): on synthetic rows (400–5,000, d = 5–50),
   digits < 5, wine and iris/wine/digits one-vs-rest, n·ε/K < 2,000 gave −0.1 to −6.9 points
   in 40 of 43 cells (breast_cancer at ε ≥ 0.25 the exception, +0.2 to +1.4); from 2,000 to
   2,500 −0.16 and +0.44; from 2,500 on +0.33 to +0.61 in 6 of 7 cells (−0.09 in the
   seventh).
5. ``logistic_regression`` without an analyst-set ``gradient_clip``: C = 1/2. For
   ``dp_agd_averaged`` without an analyst-set ``l2``:
   l2 = clamp(9·d·(2L·z₁/n)², 1e-5, 1e-3) (:func:`rule_l2`), z₁ the noise multiplier of one
   Gaussian release at the job's (ε, δ) — 9 times the squared norm of that release's noise
   (the same rule for ``dp_agd_centred``); with an intercept under ``dp_agd_averaged``, whose
   steps run on centred unit-norm rows (``dp_agd_row_map``), the ceiling is 1e-2 for a binary
   ``logistic_regression`` job, a joint one of two classes, and a joint one of 3 ≤ K ≤ 5
   classes on n ≤ 400 rows with n·ε ≤ 1,000
   (:func:`~service.optimizers.kits.joint_rule.takes_small_data_ceiling`); a joint fit whose
   steps run in the Gram form at the curvature at w = 0 takes the factor 1 and the floor 1e-6
   (:func:`~service.optimizers.kits.joint_rule.takes_gram_l2`); a joint fit of K ≥ 3 classes
   whose ceiling is 1e-3 takes min(1e-3, 1/n) (:func:`~service.optimizers.kits.joint_rule.
   joint_l2_ceiling`), and ``spread_iterations`` = the T at the l2 before it (``spread_params``).
   Evidence in "Small data" and ``kits/joint_rule.py`` ("Small data", "Gram-form l2",
   "Many rows", "Spread rows").
   Every optimizer's unset ``objective_gap`` (the bound on F(0) − min F behind the default
   radius and T) is max(1, the largest loss a row can have at w = 0): 1 for classification,
   δ·B − δ²/2 for Huber regression with label bound B (:func:`~service.models.base.
   objective_gap_bound`; on scikit-learn's diabetes data, B = 350, R² −1.76 → 0.19 at ε = 1).
   ``huber_regression`` without an analyst-set ``huber_delta``: δ = 0.03·B
   (``HUBER_FRACTION``), and its l2 rule uses L = 1 instead of the loss's L = δ (below).
6. Fallbacks, in order, if the choice is infeasible for the spec (e.g. l2 = 0 and no radius):
   ``dp_agd``, ``dp_gd``, ``noisy_sgd_bst14``, ``output_perturbation_gd``, ``noisy_sgd_scs13``.

Why (theory). For a μ-strongly convex, L-Lipschitz, β-smooth empirical risk, noisy full-gradient
methods with exactly accounted Gaussian steps reach the excess risk Õ(L² d log(1/δ)/(μ n² ε²))
of Bassily, Smith & Thakurta (2014). Every sensitivity is proportional to L, and the
clipped-slope loss with C = 1/2 has L = 1/2 (``service/models/logistic.py``): the noise halves
while correctly classified rows keep the exact logistic loss. Acceleration reaches its noise
floor in T = O(√(nε)) steps (``dp_agd``'s docstring), but with a constant step its *last*
iterate keeps the whole stationary fluctuation of the noise; Polyak–Ruppert averaging of the
tail (Polyak & Juditsky 1992) removes most of it at no privacy cost (post-processing), which
also makes more steps pay (``dp_agd_averaged``'s docstring). Where T_agd is very small (large n
but n·ε < 5,000, i.e. ε ≈ 0.1 on 20–30k rows) the tail average still contains unconverged
iterates and the last iterate is better. The regulariser: the bias of l2 grows like l2·‖w°‖²
while it damps the noise in the flat directions; the measured best l2 on Adult-TRAIN fell with
the noise variance (1e-4, 3e-5, 1e-5 at ε = 0.5, 1, 2: ∝ z₁², the ridge-like form above with
the constant 9 fitted there); the floor 1e-5 bounds R = √(2/l2) ≤ 447 and so T (compute), the
ceiling 1e-3 binds only where n·ε is small (the formula exceeds it below n ≈ 3,000 at ε = 0.5
for d ≈ 20). It was 1e-4 (the model's default) until an l2 sweep over eight public binary data
sets (``--explore``'s second table; 40 seeds, ε ∈ {0.1, 0.5, 1, 2}, every cell whose formula
exceeds 1e-4): 1e-3 is at or above 1e-4 in 26 of 31 cells — +0.0 to +3.5 points on synthetic
rows (400–5,000 rows, d = 5–50), +2.8 to +5.0 on wine class 0 against the rest (120 rows),
+0.8 to +1.7 on digits < 5 (1,200 rows) — and below it on breast_cancer (−0.2 to −1.9:
separable rows, whose large optimum the bias of l2 pulls in) and on wine at ε = 0.1 (−4.4,
every method near chance there).
Larger ceilings (3e-3, 1e-2, none) gain another 0–1 point on synthetic rows and lose 5–20 on
breast_cancer. Multiclass (one-vs-rest, each class at μ/√K) was measured the same way on wine,
iris and digits (20 seeds): 1e-3 against 1e-4 −4.6 … +3.1 points on 100–120 rows (noise at
that size), +0.4 … +2.7 on digits; scaling the formula by K changed nothing measurable.

Categorical labels (step 0), the joint model's row map, step cap, curvature step and per-row
norm clip: their rules and evidence are in ``service/optimizers/kits/joint_rule.py``.

Small data. A binary set of 700 rows at ε = 0.5 was at or below its majority class (issue 24).
With the row map and the l2 ceiling 1e-2 (``python -m bench multiclass --small-binary``, 20
seeds, test %): four synthetic 700-row sets 67.9 / 70.5 / 69.0 / 67.4 at ε = 0.5 (majority 63.3
/ 72.7 / 69.3 / 53.3; before 65.5 / 66.8 / 64.3 / 63.3), breast_cancer 91.3 (before 86.1); the
set with least signal (d = 20, scale 1) stays below its majority (70.5–71.6 vs 72.7). A released
label prior as a fixed offset with a much larger l2 reached it (75.4 on the development split)
but cost up to 2.3 points where the features carry signal. A two-class label's joint fit (the
binary problem) takes 1e-2 too since turn 14 (``--small-two-class``, test split, 20 seeds: +1.4
points over 24 cells; imbalanced sets from 83.9–94.7 to 88.8–94.7 % at ε = 0.5, majorities 90.7 /
80.7 / 94.7). For K ≥ 3, min(1e-2, 0.6/d) gained 1–7 points on wine, iris and two small
imbalanced sets but lost 3.0 / 2.5 on examples/plans.csv at ε = 0.5 / 1 (2,100 rows): not taken.

Regression (step 5). Everything in the Huber problem scales with the label bound B when δ does: with
y = B·y', w = B·w' and δ = c·B, F(w) = B²·F'(w') for the same l2, and the noise, the step 1/β, the
radius and T all follow (sensitivity 2cB/n, β = 1, gap ∝ B²). So the threshold is a fraction c of B,
never an absolute number: the model's default δ = 1 is c = 1/B, which on labels of a few hundred
capped every row's pull so low that the fit stayed far from the data (R² below 0 on diabetes at
every ε, below 0.75 on make_regression). Smaller c means less noise (L = cB) but a pull that
saturates earlier. Measured (``--explore``'s last table: 5 seeds, δ = 1e-5, 70/30 split, B = max|y|,
each feature's range as its bounds; scikit-learn's diabetes (309 rows, labels 25–346, and centred),
make_regression (4,200 rows, d = 8), Friedman #1 (2,100 rows) and a 14,000-row linear set), c ∈
{0.01, 0.03, 0.1} with l2 from the rule at L = 1 (the label-normalised squared loss's scale; the
rule at L = c puts l2 at its floor and gave R² of −1 to −8 on the small sets in a δ = 1e-6 run): no
c is best everywhere (c = 0.1 on make_regression at ε ≤ 0.5, c = 0.01 at ε = 0.1 on the small sets);
auto (c = 0.03) is within 0.05 of the best of the three in 15 of 20 cells and in every cell at ε ≥
1. Against the old default (δ = 1, l2 from the rule at L = δ): make_regression 0.65 / 0.88 / 0.99 /
0.99 at ε = 0.1 / 0.5 / 1 / 2 (was 0.13 / 0.12 / 0.42 / 0.74), diabetes −0.31 / 0.10 / 0.28 at ε =
0.5 / 1 / 2 (was −1.31 / −1.07 / −1.16), Friedman #1 and the linear set level (within 0.03); worse
only on centred diabetes at ε ≤ 0.5 (−0.42 vs −0.01, 0.08 vs 0.14) — 309 rows cannot carry ε ≤ 0.5
either way.

Why (experiments, public data only, never Adult's test file; ``python -m bench auto --explore``
re-measures it): 6 seeds per cell, δ = 1e-5, C = 1/2, test accuracy % (Adult: its TRAIN file
split 2:1; synthetic: 20,000 logistic rows, d = 21; breast_cancer: 400 rows, d = 31). "avg" is
``dp_agd_averaged``, "avg (rule)" at the rule's l2 — what auto ran before turn 7 —, "auto" the
rule's job today (``dp_agd_centred`` in the Adult and synthetic cells at ε ≥ 0.5, n·ε ≥ 2,500);
"selection" is ``private_selection`` over {avg, dp_gd} at the same (ε, δ):

==========================  =====  ======  ======  ======  =====  =========
data, ε                      auto  dp_agd  dp_gd   avg     avg    selection
                                   l2 1e-4 l2 1e-4 l2 1e-4 (rule)
==========================  =====  ======  ======  ======  =====  =========
Adult-TRAIN split, 0.1      82.38  82.38   81.01   82.14   —      refused
Adult-TRAIN split, 0.5      83.74  83.58   83.41   83.59   83.59  83.23
Adult-TRAIN split, 1        84.13  83.78   83.59   83.73   83.89  83.55
Adult-TRAIN split, 2        84.44  83.83   83.59   83.79   84.23  83.68
synthetic, 0.1              82.48  82.48   81.88   81.16   —      refused
synthetic, 0.5              88.16  87.01   88.07   87.89   88.02  87.11
synthetic, 1                88.92  87.38   88.79   88.89   88.91  88.40
synthetic, 2                89.15  88.20   88.98   89.13   89.18  88.94
breast_cancer, 0.1          64.60  65.58   63.31   68.44   64.60  refused
breast_cancer, 0.5          84.32  84.22   78.40   86.19   84.32  72.88
breast_cancer, 1            90.34  91.42   85.80   91.81   90.34  80.87
breast_cancer, 2            91.81  92.31   90.34   92.60   91.81  90.34
==========================  =====  ======  ======  ======  =====  =========

The cells with 2·T_agd > 400 (Adult-TRAIN at ε = 2: 580 steps; synthetic at ε = 1, 2: 610, 834)
run dp_agd_averaged's compute cap of 400 steps (its docstring has a 16-seed comparison);
uncapped (``--explore``'s column "auto without the 400-step cap") they were 84.19 / 88.73 /
88.98 with dp_agd_averaged (and 89.09 for "avg l2 1e-4" on synthetic at ε = 2), and are
84.46 / 88.84 / 89.08 with dp_agd_centred.
The old rule (``dp_agd`` from 10,000 rows, ``dp_gd`` below, l2 = 1e-4) was 1–1.4 points below
``dp_gd`` on the synthetic data at ε ≥ 0.5 and 2–8 points below ``dp_agd`` on breast_cancer;
the rule above is within 0.16 points of the best column in every cell but breast_cancer's, where
the l2 ceiling 1e-3 (below) costs 0.8–3.8 points against l2 = 1e-4 on these 6 seeds (0.2–1.9 on
40 seeds) and buys 1–5 points on the other small data sets. breast_cancer's 169 test rows
make its cells the noisiest (a 3-seed mean swings by 20 points); over 60 seeds (0–59) the
averaged method at C = 1/2 and l2 = 1e-4 gets 63.0 / 83.0 / 87.6 / 91.4 % at ε = 0.1 / 0.5 /
1 / 2, well above ``dp_gd``'s 62.5 / 77.3 / 84.3 / 89.5 and level with ``dp_agd``'s
64.7 / 80.6 / 88.5 / 91.4 (ahead at 0.5, behind at 0.1 and 1); at ε = 0.1 every method
ends below the majority class (61.5 %) in a third of the runs — 400 rows cannot carry
ε = 0.1. Private selection between the averaged
method and ``dp_gd`` never paid: each of its repetitions runs at ≈ 0.6 of one job's μ (E[K] = 3,
logarithmic K), which costs more than the candidates differ by once averaging closed the
dp_agd/dp_gd gap; so the rule does not use it (``private_selection`` stays in the catalog for
analysts with candidates that differ more). At ε = 0.5 on Adult-TRAIN (16 seeds) no
variation of the averaged method beat the rule's setting (83.45 ± 0.04): l2 ∈ {3e-5, 5e-5,
1e-4} × C ∈ {0.5, 0.7} × T ∈ {2, 3} × T_agd gave 82.96–83.46 (C = 0.35 and 0.7 were not
better than 1/2 without averaging either). Nor did the shape of the average (12 seeds,
100–111, the rule's T = 174 there: 83.59 ± 0.05 for the second half): averaging from T/4
83.61, from 0 83.46, from 3T/4 83.36, the last iterate 82.84, weights ∝ t over all iterates
83.59, ∝ t over the second half 83.57, ∝ t² 83.58; nor fewer steps (T = 130 / 87: at best
83.53 / 83.51). No other shape wins on all public data: on the synthetic rows the uniform
average of *all* iterates is better (+0.1 to +0.6 at ε = 0.5–2), on Adult-TRAIN worse (−0.13
at ε = 0.5), on breast_cancer the last quarter differs by −0.2 to +0.3 (s.e. ≈ 0.9) — so the
rule keeps the second half.

What else was tried at ε = 0.5 before ``dp_agd_centred`` (``python -m bench auto-alternatives``: the
same Adult-TRAIN split, 16 seeds, test accuracy %): ``dp_agd_averaged`` 83.56 ± 0.05. Its loss
splits into noise (0.26: the same steps without noise reach 83.82), unfinished optimisation (0.08:
1,000 noise-free steps reach 83.90, the optimum of the rule's objective) and the bias of l2 itself.
None of these closed it: objective perturbation with exact minimisation (one noise draw instead of
averaged steps, but the Jacobian term ε₁ = log(1 + β/(n·l2)) takes 0.11 of ε at l2 = 1e-4) 83.54
even with an optimistic calibration, 83.42 at l2 = 3e-4; centred coefficients (the clipped slope
lies in a label-fixed interval of width C, so each step's centred sum has half the sensitivity and
the label term Σ yᵢxᵢ is released once) 83.62 — its one-shot noise is a constant gradient offset
that drifts the flat (rare-category) directions, and without that noise it would reach 83.75; a
private XᵀX/n preconditioner (5 % of μ², 50 whitened steps) 83.35; gradient_clip 0.4 83.52, 260
steps 83.35, no l2 on the intercept 83.53. What did: the centred split with the label term
soft-thresholded at 1.5σ (the noise-dominated coordinates, the rare categories, set to 0): 83.78
(``dp_agd_centred``, now step 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from service.models.base import FloatArray, Loss, coefficient_anchor, parameter_count
from service.models.multinomial import MULTINOMIAL, NORM_CLIP_OPTIMIZERS, MultinomialLoss
from service.optimizers.kits.base import (
    InfeasibleSpec,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.kits.config import PlanConfig
from service.optimizers.kits.joint_rule import (
    GRAM_L2_FACTOR,
    GRAM_L2_FLOOR,
    JOINT_MIN_CLASSES,
    JOINT_STEP_CAP,
    joint_l2_ceiling,
    joint_norm_clip,
    prefers_joint,
    spread_params,
    takes_gram_l2,
    takes_small_data_ceiling,
)
from service.privacy.secure_random import SecureRandom

__all__ = [
    "AVERAGING_N_EPSILON",
    "Auto",
    "AutoChoice",
    "AutoConfig",
    "AutoParams",
    "CLIP",
    "JOINT_MIN_CLASSES",
    "JOINT_STEP_CAP",
    "RULE",
    "choose_model_and_optimizer",
    "optimizer_params",
    "prefers_joint",
    "resolve",
    "rule_l2",
]

AUTO = "auto"
CLIP = 0.5
LARGE_N = 10_000
#: n·ε from which the tail-averaged dp_agd (and the l2 rule) is used.
AVERAGING_N_EPSILON = 5_000
#: l2 = clamp(L2_FACTOR · d · (2L·z₁/n)², L2_FLOOR, L2_CEILING) for dp_agd_averaged.
L2_FACTOR = 9.0
L2_FLOOR = 1e-5
L2_CEILING = 1e-3
#: Step 5's ceiling for a binary logistic job — or a joint one of two classes, the same
#: problem, or of 3–5 classes on small data (``kits/joint_rule.takes_small_data_ceiling``)
#: — whose dp_agd_averaged steps run on mapped rows (``dp_agd_row_map``).
L2_CEILING_MAPPED = 1e-2
#: huber_regression without an analyst-set huber_delta: δ = HUBER_FRACTION · label_bound.
HUBER_FRACTION = 0.03
RULE = (
    "categorical label with logistic_regression (gradient_clip and l1 unset): "
    "multinomial_logistic_regression, one joint fit of the K classes, with "
    "gradient_norm_clip = min(gradient_clip, (K-1)/K)*sqrt(K/(K-1)) from K = 3 when unset "
    "(dp_agd_averaged, dp_agd, dp_gd); "
    "delta > 0 and a convex loss: dp_agd if n >= 10000 and n*epsilon < 5000, else "
    "dp_agd_centred for logistic_regression without l1 if n*epsilon/classes >= 2500, "
    "dp_agd_averaged otherwise "
    "(l2 = clamp(9*d*(2*L*z1/n)^2, 1e-5, 1e-3) when the analyst did not set "
    "l2, L = 1 for regression; with an intercept under dp_agd_averaged, whose rows it centres "
    "at a private mean and scales to unit norm, ceiling 1e-2 for binary logistic_regression, "
    "a joint fit of two classes and one of 3 <= K <= 5 classes on n <= 400 rows with "
    "n*epsilon <= 1000; factor 1 and floor 1e-6 for a joint fit of K >= 3 classes whose "
    "steps take the Gram form at the curvature 1/K, on many rows of width <= 32; ceiling "
    "min(1e-3, 1/n) for a joint fit of K >= 3 classes otherwise at 1e-3, and spread_iterations "
    "= the T of the l2 before it, run where the rows prove spread); delta > 0 and "
    "a non-convex loss: dp_gd; delta = 0: output_perturbation_gd; logistic_regression "
    "without gradient_clip: gradient_clip = 0.5; "
    "huber_regression without huber_delta: huber_delta = 0.03*label_bound; theory defaults for the "
    "rest; first feasible of the fallbacks dp_agd, dp_gd, noisy_sgd_bst14, "
    "output_perturbation_gd, noisy_sgd_scs13"
)
#: n·ε/K from which dp_agd_centred replaces dp_agd_averaged (step 4; K classes one-vs-rest).
CENTRED_N_EPSILON = 2_500
#: The rule's tail-averaged optimizers (step 4), whose l2 the rule sets (step 5).
AVERAGED = ("dp_agd_centred", "dp_agd_averaged")
FALLBACKS = ("dp_agd", "dp_gd", "noisy_sgd_bst14", "output_perturbation_gd", "noisy_sgd_scs13")


class AutoParams(BaseModel):
    """``auto`` takes no parameters: name an optimizer to set hyper-parameters yourself."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class AutoConfig(PlanConfig):
    """What ``fit`` reads from a stored plan: the chosen optimizer's plan plus ``"auto"``, the
    public record of the choice (field names = stored keys)."""

    auto: Any

    @property
    def optimizer(self) -> str:
        """The name of the optimizer the plan runs."""
        return str(self.auto["optimizer"])


@dataclass(frozen=True)
class AutoChoice:
    """The resolved job: the model spec (possibly with ``gradient_clip`` filled in), the chosen
    optimizer's name and parameters (the joint model's step cap), and the public record
    stored in the plan under ``auto``."""

    model: dict[str, Any]
    optimizer: str
    record: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)


def preferred_optimizer(
    convex: bool, target: PrivacyTarget, n: int, anchored: bool = False, classes: int = 1
) -> str:
    """Steps 1–4 of the rule; ``anchored``: the loss has a coefficient anchor and l1 = 0;
    ``classes``: K for a one-vs-rest job (1 for a binary or regression one)."""
    if target.delta == 0:
        return "output_perturbation_gd"
    if not convex:
        return "dp_gd"
    if n >= LARGE_N and n * target.epsilon < AVERAGING_N_EPSILON:
        return "dp_agd"
    if anchored and n * target.epsilon / max(1, classes) >= CENTRED_N_EPSILON:
        return "dp_agd_centred"
    return "dp_agd_averaged"


def candidates(
    convex: bool, target: PrivacyTarget, n: int, anchored: bool = False, classes: int = 1
) -> list[str]:
    """The preferred optimizer, then the fallbacks (no repeats)."""
    first = preferred_optimizer(convex, target, n, anchored, classes)
    return [first, *(name for name in FALLBACKS if name != first)]


def is_anchored(loss: Loss) -> bool:
    """Whether ``dp_agd_centred`` applies: a coefficient anchor (logistic) and no l1 term."""
    return coefficient_anchor(loss) is not None and not loss.l1


def rule_l2(
    lipschitz: float,
    n: int,
    d: int,
    target: PrivacyTarget,
    ceiling: float = L2_CEILING,
    factor: float = L2_FACTOR,
    floor: float = L2_FLOOR,
) -> float:
    """Step 5: clamp(9·d·(2L·z₁/n)², 1e-5, ``ceiling``), with z₁ the noise multiplier of one
    Gaussian release at the job's (ε, δ) — 9 times the squared norm of one full-budget
    release's noise; the ceiling is 1e-3, or 1e-2 for the jobs on mapped rows of step 5; a
    joint fit in the Gram form at the curvature at w = 0 takes the factor 1 and the floor 1e-6
    (``kits/joint_rule.py``, "Gram-form l2")."""
    from service.privacy.gdp import gdp_mu

    noise = 2.0 * lipschitz / (n * gdp_mu(target.epsilon, target.delta))
    return min(ceiling, max(floor, factor * d * noise * noise))


def choose_model_and_optimizer(
    model: dict[str, Any],
    fields_set: set[str],
    convex: bool,
    target: PrivacyTarget,
    n: int,
    n_features: int = 0,
    classes: int = 1,
    rows_ceiling: bool = True,
) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """The public part of the rule: the model spec to run (``gradient_clip`` = 1/2 filled in for
    logistic regression and ``huber_delta`` = 0.03·B for Huber regression when the analyst did
    not set them; ``l2`` by :func:`rule_l2` for ``dp_agd_averaged`` when the analyst did not set
    it), the candidate optimizers in order, and what was filled in. ``fields_set``: the model
    fields the analyst sent; ``rows_ceiling`` False: the joint l2 before its many-rows ceiling."""
    from service.models.registry import build_loss, parse_model_spec

    resolved = dict(model)
    filled: dict[str, Any] = {}
    if prefers_joint(model, fields_set, classes):
        resolved = {
            "type": MULTINOMIAL,
            "l2": model.get("l2", 1e-4),
            "l1": 0.0,
            "fit_intercept": bool(model.get("fit_intercept", True)),
            "gradient_clip": CLIP,
        }
        filled["model.type"] = MULTINOMIAL
        filled["model.gradient_clip"] = CLIP
    if model.get("type") == MULTINOMIAL and "gradient_clip" not in fields_set:
        resolved["gradient_clip"] = CLIP
        filled["model.gradient_clip"] = CLIP
    bound = joint_norm_clip(resolved.get("gradient_clip"), classes)
    if resolved.get("type") == MULTINOMIAL and "gradient_norm_clip" not in fields_set and bound:
        resolved["gradient_norm_clip"] = bound
        filled["model.gradient_norm_clip"] = bound
    if (
        model.get("type") == "logistic_regression"
        and "gradient_clip" not in fields_set
        and resolved.get("type") == "logistic_regression"
    ):
        resolved["gradient_clip"] = CLIP
        filled["model.gradient_clip"] = CLIP
    if model.get("type") == "huber_regression" and "huber_delta" not in fields_set:
        resolved["huber_delta"] = HUBER_FRACTION * float(model["label_bound"])
        filled["model.huber_delta"] = resolved["huber_delta"]
    loss = build_loss(parse_model_spec(resolved), classes if classes > 1 else None)
    names = candidates(convex, target, n, is_anchored(loss), classes)
    if names[0] in AVERAGED and "l2" in model and "l2" not in fields_set:
        width = n_features + (1 if resolved.get("fit_intercept") else 0)
        d = parameter_count(loss, width)  # K·width for the joint model: its noise's dimension
        # Regression: the rule at the label-normalised scale (module docstring, step 5).
        lipschitz = 1.0 if loss.task == "regression" else float(loss.lipschitz)
        two_classes = (classes <= 1 and resolved["type"] == "logistic_regression") or (
            classes == 2 and resolved["type"] == MULTINOMIAL
        )
        small = resolved["type"] == MULTINOMIAL and takes_small_data_ceiling(
            n, classes, target.epsilon
        )
        mapped = names[0] == "dp_agd_averaged" and resolved.get("fit_intercept")
        if mapped and (two_classes or small):
            ceiling = L2_CEILING_MAPPED
        elif resolved["type"] == MULTINOMIAL and rows_ceiling:
            ceiling = joint_l2_ceiling(n, classes, L2_CEILING)
        else:
            ceiling = L2_CEILING
        gram = mapped and resolved["type"] == MULTINOMIAL
        shape = (
            (GRAM_L2_FACTOR, GRAM_L2_FLOOR)
            if gram and takes_gram_l2(n, width, classes, target)
            else (L2_FACTOR, L2_FLOOR)
        )
        resolved["l2"] = rule_l2(lipschitz, n, max(1, d), target, ceiling, *shape)
        filled["model.l2"] = resolved["l2"]
    return resolved, names, filled


def optimizer_params(name: str, resolved: dict[str, Any]) -> dict[str, Any]:
    """The parameters the rule sets for candidate ``name``: ``max_iterations`` =
    :data:`JOINT_STEP_CAP` for a joint multinomial model run by a tail-averaged optimizer
    (module docstring, "Categorical labels"); none otherwise."""
    if name in AVERAGED and resolved.get("type") == MULTINOMIAL:
        return {"max_iterations": JOINT_STEP_CAP}
    return {}


def resolve(
    model: BaseModel,
    n: int,
    n_features: int,
    target: PrivacyTarget,
    classes: int | None = None,
) -> AutoChoice:
    """Resolve an ``auto`` job: the first feasible candidate of the rule, planned with the
    resolved model. Raises :class:`InfeasibleSpec` (field ``optimizer``) if none is feasible.
    Public facts only: the spec, n, the number of features, the target, the label's classes."""
    from service.models.registry import build_loss, parse_model_spec
    from service.optimizers.kits.one_vs_rest import check_multiclass_model
    from service.optimizers.kits.planning import (
        check_loss_magnitudes,
        check_weight_count,
        model_dimension,
        plan_job,
    )

    loss = build_loss(model)
    # A model whose constants overflow, or whose weights exceed the cap, is at fault whatever
    # the optimizer: name its field (every candidate would refuse it, and the refusal would
    # otherwise name "optimizer").
    check_loss_magnitudes(model, loss)
    check_weight_count(model_dimension(model, n_features), classes)
    check_multiclass_model(loss, AUTO, classes)  # a joint model on a non-categorical label
    sent = model.model_dump(mode="json")
    facts = (set(model.model_fields_set), bool(loss.convex), target, n, n_features, classes or 1)
    resolved, names, filled = choose_model_and_optimizer(sent, *facts)
    l2_before = choose_model_and_optimizer(sent, *facts, rows_ceiling=False)[0].get("l2")
    last: InfeasibleSpec | None = None
    for name in names:
        params = optimizer_params(name, resolved)
        unclipped = name not in NORM_CLIP_OPTIMIZERS and "model.gradient_norm_clip" in filled
        spec = parse_model_spec(
            {k: v for k, v in resolved.items() if k != "gradient_norm_clip"}
            if unclipped
            else resolved
        )  # a fallback that needs exact gradients runs the model without the filled clip
        try:
            job = plan_job(spec, name, params, n, n_features, target, classes=classes)
        except InfeasibleSpec as exc:
            last = exc
            continue
        params |= spread_params(job, l2_before, spec, name, params, n, n_features, target, classes)
        if unclipped:
            filled = {k: v for k, v in filled.items() if k != "model.gradient_norm_clip"}
        if params:
            filled = {**filled, **{f"optimizer.params.{k}": v for k, v in params.items()}}
        record = {
            "chosen_by": AUTO,
            "optimizer": name,
            "multiclass": (
                None
                if not classes
                else ("joint" if resolved.get("type") == MULTINOMIAL else "one_vs_rest")
            ),
            "filled": filled,
            "rule": RULE,
            "facts": {
                "n": n,
                "features": n_features,
                "epsilon": target.epsilon,
                "delta": target.delta,
                "classes": classes,
            },
        }
        return AutoChoice(
            model=spec.model_dump(mode="json"), optimizer=name, record=record, params=params
        )
    assert last is not None
    raise InfeasibleSpec(
        "optimizer", f"auto found no feasible optimizer for this job: {last.message}"
    )


class Auto:
    """Catalog entry and library use: with a fixed loss (the model spec is already decided),
    :meth:`plan` plans the rule's first feasible optimizer and records it; :meth:`fit` runs that
    optimizer. The service resolves ``auto`` one level higher (``service.domain.submission``),
    where it may also fill the model's ``gradient_clip``, and stores the chosen optimizer's own
    job."""

    name: ClassVar[str] = AUTO
    summary: ClassVar[str] = (
        "The default: picks the optimizer and every unset hyper-parameter from public facts "
        "(n, d, bounds, ε, δ, model), records the choice in the plan"
    )
    assumptions: ClassVar[str] = "Those of the optimizer it picks (recorded in the plan)"
    guarantee: ClassVar[str] = (
        "That of the optimizer it picks: (ε, δ)-DP (dp_agd_centred, dp_agd_averaged, dp_agd, "
        "dp_gd) or ε-DP "
        "(output_perturbation_gd), replace-one"
    )
    reference: ClassVar[str] = (
        "Rule from Bassily, Smith & Thakurta 2014 (utility of noisy gradient methods), Polyak & "
        "Juditsky 1992 (averaging) and "
        "experiments on public data, see service/optimizers/auto.py"
    )
    Params: ClassVar[type[BaseModel]] = AutoParams
    Config: ClassVar[type[PlanConfig]] = AutoConfig

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        from service.optimizers.kits.registry import get_optimizer  # the registry imports us

        last: InfeasibleSpec | None = None
        for name in candidates(bool(getattr(loss, "convex", True)), target, n, is_anchored(loss)):
            optimizer = get_optimizer(name)
            model_type = MULTINOMIAL if isinstance(loss, MultinomialLoss) else None
            params = optimizer.Params.model_validate(optimizer_params(name, {"type": model_type}))
            try:
                plan = optimizer.plan(params, loss, n, d, target)
            except InfeasibleSpec as exc:
                last = exc
                continue
            hyper = dict(plan.hyperparameters)
            hyper[AUTO] = {"chosen_by": AUTO, "optimizer": name, "rule": RULE}
            return ReleasePlan(
                mechanism=plan.mechanism,
                sensitivity=plan.sensitivity,
                noise_scale=plan.noise_scale,
                event=plan.event,
                total_steps=plan.total_steps,
                hyperparameters=hyper,
                parallel_events=plan.parallel_events,
            )
        assert last is not None
        raise InfeasibleSpec(
            "optimizer", f"auto found no feasible optimizer for this job: {last.message}"
        )

    def fit(
        self,
        plan: ReleasePlan,
        loss: Loss,
        X: FloatArray,
        y: FloatArray,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> FloatArray:
        from service.optimizers.kits.registry import get_optimizer

        chosen = get_optimizer(AutoConfig.from_hyperparameters(plan.hyperparameters).optimizer)
        return chosen.fit(plan, loss, X, y, rng, progress)


OPTIMIZER = Auto
