"""Between models: permutation alignment, loss barriers and mode-connecting curves.

Two networks trained from different seeds compute similar functions with their hidden
units in another order. :func:`align` finds the permutation of B's units that brings it
into A's basis (weight or activation matching, Git Re-Basin), on a structure traced from
any ``nn.Module`` (:func:`permutation_spec`) and checked to leave B's function unchanged;
:func:`barrier` measures the loss and error barrier along the line between A and B
(naive or aligned, batch-norm statistics re-estimated along it) as a line landscape;
:func:`fit_curve` trains a Bezier or polygonal-chain curve of low loss between them
(Garipov et al.), with no layer rewritten.
"""

from landscape.connect._align import Alignment, align
from landscape.connect._barrier import Barrier, barrier, barrier_height
from landscape.connect._check import FunctionChanged
from landscape.connect._curve import Curve, fit_curve
from landscape.connect._spec import PermutationSpec, permutation_spec

__all__ = ["align", "Alignment", "barrier", "Barrier", "barrier_height", "fit_curve", "Curve",
           "PermutationSpec", "permutation_spec", "FunctionChanged"]
