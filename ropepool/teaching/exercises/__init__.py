"""Workshop exercises: checkers that say what is wrong, and reference solutions kept aside.

One module per exercise (:mod:`.heads`, :mod:`.fix_call`, :mod:`.rope_numpy`, :mod:`.pool_predict`,
:mod:`.decode_slots`), the feedback every checker of the suite shares (:mod:`ropepool.teaching.feedback`) and the solutions (:mod:`.solutions`).

=====  =====================================  ==========================================
 n     the learner writes                     ``check_n`` runs it and names the mistake
=====  =====================================  ==========================================
 1     ``heads(config) -> dict``              Hq, Hkv, D of eight configs (GQA, MQA, MHA)
 2     ``fix(kwargs) -> kwargs``              the op on the fixed call: what still fails
 3     ``rope(x, positions, base)``           NeoX RoPE against the float64 reference
 4     a list: the pool after one call        each wrong row, and why (slot -1, ...)
 5     ``choose(occupancy, needs_slot)``      slots taken, out of range, duplicated
=====  =====================================  ==========================================

Notebooks 07 and 08 end with one each: ``check_slot_mapping`` (07: one engine step's positions and
slots) and ``check_kv_estimate`` (08: a model's KV bytes from its config).

``check_n(answer)`` returns a passing :class:`Verdict` or raises :class:`ExerciseFailed`
(an ``AssertionError``) whose message names the problem; ``err.problem`` is a short code
for it (``"gptj_pairing"``, ``"slot_taken"``, ...). :func:`feedback` runs a checker and
returns the verdict either way, for a learner's cell; :func:`expect_rejection` proves that a
wrong answer is rejected, the way :func:`ropepool.teaching.checks.expect_error` proves an error.
The reference answers are ``solution_n``; :func:`show_solution` displays one's source.

Example
-------
>>> from ropepool.teaching import exercises
>>> exercises.check_5(exercises.solution_5).passed
True
>>> exercises.feedback(exercises.check_5, lambda occupancy, needs_slot: [0] * len(needs_slot)).problem
'slot_taken'
"""

from ..catalog import CATALOG  # noqa: F401  (the error catalog the checkers quote)
from ..feedback import ExerciseFailed, Verdict, expect_rejection, feedback, markdown_escape  # noqa: F401
from .heads import MHA_CONFIG, check_1, exercise_1_configs, solution_1  # noqa: F401
from .fix_call import SMALL_CONFIG, broken_call, check_2, solution_2  # noqa: F401
from .rope_numpy import ROPE_MISTAKES, _variant, check_3, exercise_3_cases, rope_with_mistake, solution_3  # noqa: F401
from .pool_predict import check_4, pool_scenario, run_pool_scenario, solution_4  # noqa: F401
from .decode_slots import check_5, slot_scenarios, solution_5  # noqa: F401
from .slot_mapping import check_slot_mapping, solution_slot_mapping, step_scenarios  # noqa: F401
from .kv_estimate import check_kv_estimate, solution_kv_estimate  # noqa: F401
from .solutions import CHECKS, SOLUTIONS, Solution, show_solution  # noqa: F401
