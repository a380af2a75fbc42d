"""The tagging half of the span-NER head: one linear-chain CRF over O + BIOUL tags of every class, as the
authors' harness runs it (Rian-T/tabib `src/tabib/models/bert_span_ner.py` `BIOULTagger`, `src/tabib/models/crf.py`
`BIOULDecoder(allow_overlap=True, allow_juxtaposition=True, learnable_transitions=True)`).

Tag layout: 0 = O, then for class c (class 0 is the "O" span class itself, as in Rian-T/tabib's label map) the tags
I = 1 + 4c, B = 2 + 4c, L = 3 + 4c, U = 4 + 4c. Transitions, start and end scores are learned, forbidden ones
are held at IMPOSSIBLE. The CRF is never trained by its own likelihood: its forward-backward marginals
give, per class and candidate span, min(log P(no hole), log P(begins), log P(ends)) (nlstruct's bound), a
log-probability added to the biaffine score, and the span BCE trains the tagger through these marginals.
pytorch-crf has no marginals, so the recursion is written here, in log space and differentiable.
"""

from __future__ import annotations

import torch
from torch import nn

O = 0  # noqa: E741 - the scheme's own letter (the outside tag)
I_, B_, L_, U_ = range(4)  # offsets of a class's tags after 1 + 4c
IMPOSSIBLE = -1e5  # Rian-T/tabib's value; finite, so log-sum-exp over forbidden paths never gives NaN gradients
# exp of anything below this is < 1.7e-38, nothing next to the exp(0) = 1 of a log-sum-exp's largest term (and
# next to any sum float32 can tell from 1); clamped there first, exp takes its fast path: on this CPU (AVX512)
# exp of a (4, 45, 45) tensor of mostly IMPOSSIBLE-sized arguments took 497 us, 46 us once clamped
EXP_FLOOR = -87.0


def logsumexp(x: torch.Tensor, dim: int) -> torch.Tensor:
    """torch.logsumexp's own steps (max, exp of the shifted values, sum, log, max back), with the shifted
    values clamped at EXP_FLOOR before exp (the same value; see EXP_FLOOR). Inputs must be finite."""
    top = x.amax(dim, keepdim=True)
    return (x - top).clamp_(min=EXP_FLOOR).exp_().sum(dim).log_() + top.squeeze(dim)


def tag(kind: int, cls: int) -> int:
    """Index of tag `kind` (I_, B_, L_ or U_) of class `cls`."""
    return 1 + 4 * cls + kind


def bioul_constraints(n_classes: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(forbidden transitions (T, T), forbidden starts (T,), forbidden ends (T,)) over T = 1 + 4 n_classes
    tags: BIOUL grammar with overlapping entities of one class and juxtaposition allowed (Rian-T/tabib's settings)."""
    n_tags = 1 + 4 * n_classes
    allowed = torch.zeros(n_tags, n_tags, dtype=torch.bool)
    allowed[O, O] = True
    for i in range(n_classes):
        for j in range(n_classes):  # an entity may end and another (any class) start right away
            for end_kind in (L_, U_):
                for start_kind in (B_, U_):
                    allowed[tag(end_kind, i), tag(start_kind, j)] = True
        for prev, nxt in ((B_, I_), (I_, I_), (I_, L_), (B_, L_),  # inside an entity
                          (L_, I_), (L_, L_), (I_, B_), (B_, B_), (B_, U_), (U_, L_), (U_, I_), (I_, U_)):  # overlaps
            allowed[tag(prev, i), tag(nxt, i)] = True
        allowed[O, tag(B_, i)] = allowed[O, tag(U_, i)] = True
        allowed[tag(L_, i), O] = allowed[tag(U_, i), O] = True
    start = torch.zeros(n_tags, dtype=torch.bool)
    end = torch.zeros(n_tags, dtype=torch.bool)
    for i in range(n_classes):
        start[[tag(I_, i), tag(L_, i)]] = True
        end[[tag(I_, i), tag(B_, i)]] = True
    return ~allowed, start, end


class BioulCrf(nn.Module):
    """Linear-chain CRF over the BIOUL tags of `n_classes` classes with learned, constrained transitions."""

    # the buffers register_buffer sets (torch types a module's unknown attributes as Tensor | Module)
    forbidden: torch.Tensor
    forbidden_start: torch.Tensor
    forbidden_end: torch.Tensor

    def __init__(self, n_classes: int):
        super().__init__()
        forbidden, start, end = bioul_constraints(n_classes)
        self.n_classes = n_classes
        self.register_buffer("forbidden", forbidden, persistent=False)
        self.register_buffer("forbidden_start", start, persistent=False)
        self.register_buffer("forbidden_end", end, persistent=False)
        self.transitions = nn.Parameter(torch.zeros(forbidden.shape))
        self.start_transitions = nn.Parameter(torch.zeros(start.shape))
        self.end_transitions = nn.Parameter(torch.zeros(end.shape))

    def scores(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(transitions, start, end) with the forbidden entries at IMPOSSIBLE."""
        return (self.transitions.float().masked_fill(self.forbidden, IMPOSSIBLE),
                self.start_transitions.float().masked_fill(self.forbidden_start, IMPOSSIBLE),
                self.end_transitions.float().masked_fill(self.forbidden_end, IMPOSSIBLE))

    def log_marginals(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log P(tag_t = y | x) by forward-backward in log space (differentiable).

        emissions (N, T, tags), mask (N, T) bool right-padded with mask[:, 0] True. Padded positions get
        log P(O) = 0, so they read as "outside" downstream."""
        trans, start, end = self.scores()
        return ForwardBackward.apply(emissions.float(), trans, start, end, mask)


class ForwardBackward(torch.autograd.Function):
    """CRF log-marginals with a hand-written backward pass.

    Why: through autograd, each of the 2 x T recursion steps records a few nodes and its backward replays
    them one by one (about 1.3 s of a 2 x 1,024-subword training step on CPU). The forward pass is the plain
    recursion (`logsumexp` above: the same values); the backward pass propagates the adjoints of the
    alpha and beta recursions with the softmax weights they imply, a matrix-vector product per step, and
    sums the transition gradients once per chunk of steps. tests/heads/test_ner_compute.py compares both
    with autograd through the plain recursion."""

    CHUNK = 64  # steps whose (N, chunk, tags, tags) softmax weights are built at once in backward

    @staticmethod
    def forward(ctx, emissions, trans, start, end, mask):  # noqa: ANN001, ANN205 - autograd's signature
        n, steps, n_tags = emissions.shape
        alpha = emissions.new_empty(n, steps, n_tags)
        inflow = emissions.new_zeros(n, steps, n_tags)  # logsumexp_i(alpha_{t-1}(i) + trans(i, j))
        alpha[:, 0] = start + emissions[:, 0]
        for t in range(1, steps):
            inflow[:, t] = logsumexp(alpha[:, t - 1].unsqueeze(2) + trans, dim=1)
            alpha[:, t] = torch.where(mask[:, t, None], inflow[:, t] + emissions[:, t], alpha[:, t - 1])
        log_z = torch.logsumexp(alpha[:, -1] + end, dim=-1)
        beta = emissions.new_empty(n, steps, n_tags)
        beta[:, -1] = end
        for t in range(steps - 2, -1, -1):
            step = logsumexp(trans + (emissions[:, t + 1] + beta[:, t + 1]).unsqueeze(1), dim=2)
            beta[:, t] = torch.where(mask[:, t + 1, None], step, end)
        ctx.save_for_backward(emissions, trans, end, mask, alpha, inflow, beta, log_z)
        marginals = alpha + beta - log_z[:, None, None]
        outside = torch.full_like(marginals, IMPOSSIBLE)
        outside[..., O] = 0.0
        return torch.where(mask[..., None], marginals, outside)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        emissions, trans, end, mask, alpha, inflow, beta, log_z = ctx.saved_tensors
        n, steps, _ = emissions.shape
        grad = grad * mask[..., None]  # padded positions are constants
        real = mask[..., None].to(grad.dtype)
        grad_z = -grad.sum((1, 2))
        final = torch.softmax(alpha[:, -1] + end, dim=-1) * grad_z[:, None]
        grad_end = final.sum(0)
        grad_emissions = torch.zeros_like(emissions)
        grad_trans = torch.zeros_like(trans)
        # alpha adjoints, from the last step back: a_{t-1}(i) = G_{t-1}(i) + sum_j P_t(i, j) a_t(j) at a real
        # step t, P_t(i, j) = exp(alpha_{t-1}(i) + trans(i, j) - inflow_t(j)); a padded step passes a_t on
        adjoint = grad[:, -1] + final
        for hi in range(steps, 1, -ForwardBackward.CHUNK):
            lo = max(hi - ForwardBackward.CHUNK, 1)
            weights = (alpha[:, lo - 1:hi - 1, :, None] + trans - inflow[:, lo:hi, None, :]).clamp_(min=EXP_FLOOR).exp_()
            arrived_steps: list[torch.Tensor] = []
            for t in range(hi - 1, lo - 1, -1):
                step = adjoint * real[:, t]
                arrived_steps.append(step)
                back = torch.bmm(weights[:, t - lo], step.unsqueeze(2)).squeeze(2)
                adjoint = grad[:, t - 1] + torch.where(mask[:, t, None], back, adjoint)
            arrived = torch.stack(arrived_steps[::-1], 1)
            grad_emissions[:, lo:hi] += arrived
            grad_trans += torch.einsum("ntij,ntj->ij", weights, arrived)
        grad_emissions[:, 0] += adjoint
        grad_start = adjoint.sum(0)
        # beta adjoints, from the first step on: b_{t+1}(j) = G_{t+1}(j) + sum_i b_t(i) Q_t(i, j) when step
        # t + 1 is real, Q_t(i, j) = exp(trans(i, j) + e_{t+1}(j) + beta_{t+1}(j) - beta_t(i)); else beta_t = end
        adjoint = grad[:, 0]
        for lo in range(0, steps - 1, ForwardBackward.CHUNK):
            hi = min(lo + ForwardBackward.CHUNK, steps - 1)
            weights = (trans + (emissions[:, lo + 1:hi + 1] + beta[:, lo + 1:hi + 1])[:, :, None, :]
                       - beta[:, lo:hi, :, None]).clamp_(min=EXP_FLOOR).exp_()
            weights = torch.where(mask[:, lo + 1:hi + 1, None, None], weights, 0.0)  # beta_t = end: no softmax
            sent_steps: list[torch.Tensor] = []
            for t in range(lo, hi):
                step = adjoint * real[:, t + 1]
                sent_steps.append(step)
                forward = torch.bmm(step.unsqueeze(1), weights[:, t - lo]).squeeze(1)
                grad_end += (adjoint * (1 - real[:, t + 1])).sum(0)
                adjoint = grad[:, t + 1] + forward
            sent = torch.stack(sent_steps, 1)
            grad_trans += torch.einsum("nti,ntij->ij", sent, weights)
            grad_emissions[:, lo + 1:hi + 1] += torch.einsum("nti,ntij->ntj", sent, weights)
        grad_end += adjoint.sum(0)
        return grad_emissions, grad_trans, grad_start, grad_end, None


def band_index(n_units: int, max_width: int, device: torch.device | None = None) -> torch.Tensor:
    """(W, K) index of the last unit of the span starting at w with width k+1, clamped into range
    (spans running past the end are masked by the caller)."""
    w = torch.arange(n_units, device=device)[:, None]
    k = torch.arange(max_width, device=device)[None, :]
    return (w + k).clamp(max=max(n_units - 1, 0))


def span_log_scores(log_marginals: torch.Tensor, n_classes: int, band: int, eps: float = 1e-8) -> torch.Tensor:
    """Per class, the tagger's log-score (N, W, K, classes) of the span [w, w + k]:
    min(log P(no O inside), log P(begins at w), log P(ends at w + k)) (Rian-T/tabib `BIOULTagger.forward`)."""
    n, w, _ = log_marginals.shape
    per_class = log_marginals[..., 1:].reshape(n, w, n_classes, 4)
    begins = torch.logsumexp(per_class[..., [B_, U_]], dim=-1)
    ends = torch.logsumexp(per_class[..., [L_, U_]], dim=-1)
    inside = torch.logsumexp(per_class, dim=-1)
    cum = torch.cat([torch.zeros_like(inside[:, :1]), inside.cumsum(1)], dim=1)
    last = band_index(w, band, log_marginals.device)
    no_hole = cum[:, last + 1] - cum[:, :w, None]
    return torch.minimum(torch.minimum(no_hole.clamp(max=-eps), begins[:, :, None]), ends[:, last])
