# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Tests of the distattn package (issue #38), one rank or several under mpiexec:

    mpiexec -n 2 python3 python/tests/run_tests.py [NAME...]

Every rank runs every test collectively (same order). Exit status: 0 all passed; 1 a test
failed (the failing rank aborts the job, so no rank waits on a dead peer); 77 torch or mpi4py
is missing (ctest counts it as skipped). Tests that need a newer torch than the one installed
report it and count as passed-with-a-skip-line, never 77. Inputs are fresh random numbers on
every run (the seed is printed to reproduce: DISTATTN_TEST_SEED)."""
import math
import os
import sys
import time
import traceback

try:
    import torch
    from mpi4py import MPI
except ImportError as e:
    print(f"SKIP: the distattn package tests need torch and mpi4py ({e})", flush=True)
    sys.exit(77)

import distattn
from distattn import _ops

COMM = MPI.COMM_WORLD
RANK, P = COMM.Get_rank(), COMM.Get_size()
torch.set_num_threads(1)
SEED = COMM.bcast(int(os.environ.get("DISTATTN_TEST_SEED", time.time_ns() % 2**31)), root=0)
GEN = torch.Generator().manual_seed(SEED)


def rand(*shape, dtype=torch.float64):
    """The same global random tensor on every rank (one generator, advanced alike)."""
    return torch.randn(*shape, generator=GEN, dtype=torch.float64).to(dtype)


def allowed(S, causal=True, window=None, docs=None):
    """The dense [query, key] mask of S global positions, built here from the definition and
    nowhere else: key j is seen from query p iff p - left <= j <= p + right (window None:
    unbounded; an int W: (W, 0)), when causal j <= p, and with documents (a list of global
    offsets) j lies in p's document."""
    left, right = (S, S) if window is None else (window, 0) if isinstance(window, int) else window
    p = torch.arange(S)[:, None]
    j = torch.arange(S)[None, :]
    ok = (j >= p - left) & (j <= p + right)
    if docs is not None:
        doc = torch.tensor([sum(1 for x in docs[1:] if x <= i) for i in range(S)])  # document of each position
        ok = ok & (doc[:, None] == doc[None, :])
    return ok & (j <= p) if causal else ok


def random_documents(S):
    """Fresh global offsets over S tokens, the same on every rank: a one-token document first,
    then documents of random lengths (some inside a rank's tokens, some across ranks)."""
    cuts = torch.randint(2, S, (max(1, S // 6),), generator=GEN).tolist()
    return [0, 1] + sorted(set(cuts)) + [S]


def reference(q, k, v, causal=True, scale=None, window=None, docs=None):
    """Plain softmax(q k^T * scale) v in float64 on global [b, S, h, d] tensors, with lse, under
    the mask `allowed` builds (every query sees at least its own key)."""
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    h, hk, d = q.shape[2], k.shape[2], q.shape[3]
    k, v = (t.repeat_interleave(h // hk, dim=2) for t in (k, v))
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * (scale or 1.0 / math.sqrt(d))
    s = s.masked_fill(~allowed(q.shape[1], causal, window, docs), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), v), lse


def reference_grads(q, k, v, do, causal=True, scale=None, window=None, docs=None):
    q, k, v = (t.detach().to(torch.float64).requires_grad_() for t in (q, k, v))
    o, lse = reference(q, k, v, causal, scale, window, docs)
    o.backward(do.to(torch.float64))
    return o.detach(), lse.detach(), q.grad, k.grad, v.grad


def close(name, got, want, tol):
    err = (got.to(torch.float64) - want).abs().max().item()
    ref = want.abs().max().item()
    assert err <= tol * max(ref, 1.0), f"{name}: max error {err:.3e} > {tol:.1e} (max |ref| {ref:.3e})"
    return err


def expect_error(kinds, words, fn):
    try:
        fn()
    except kinds as e:
        msg = str(e)
        for w in words:
            assert w in msg, f"error message {msg!r} does not name {w!r}"
        return msg
    raise AssertionError(f"no {kinds} raised (expected one naming {words})")


SCHEDULES_CAUSAL = ["zigzag", "ulysses", "balanced", "ring", "grid2d-o", "grid2d-no", "hybrid", "auto"]
SCHEDULES_FULL = ["zigzag", "ulysses", "grid2d-o", "grid2d-no"]


def run_case(schedule, causal, dtype, b=2, S=None, h=4, hk=2, d=8, scale=None, layout="bshd", window=None,
             ref_window="same", docs=None, docs_dtype=torch.int64):
    """Distributed forward and backward against the float64 reference on fresh inputs. The
    reference's window is `window` unless ref_window says otherwise; `docs` (global offsets)
    go to distattn.attention as cu_seqlens of docs_dtype and to the reference."""
    S = S or 8 * P
    q, k, v, do = rand(b, S, h, d), rand(b, S, hk, d), rand(b, S, hk, d), rand(b, S, h, d)
    ref_window = window if ref_window == "same" else ref_window
    o_ref, lse_ref, dq_ref, dk_ref, dv_ref = reference_grads(q, k, v, do, causal, scale, ref_window, docs)
    cu_seqlens = None if docs is None else torch.tensor(docs, dtype=docs_dtype)
    sh = lambda x: distattn.shard(x.to(dtype), schedule=schedule, causal=causal, heads=h, kv_heads=hk)[0]
    ql, kl, vl, dol = (sh(t).requires_grad_() for t in (q, k, v)), None, None, sh(do)
    ql, kl, vl = ql
    args = (ql, kl, vl)
    if layout == "sbhd":
        args = tuple(t.detach().transpose(0, 1).contiguous().requires_grad_() for t in args)
    o, lse = distattn.attention(*args, schedule=schedule, causal=causal, scale=scale, layout=layout,
                                return_lse=True, window=window, cu_seqlens=cu_seqlens)
    if layout == "sbhd":
        o.backward(dol.transpose(0, 1))
        o = o.transpose(0, 1)
        grads = [t.grad.transpose(0, 1) for t in args]
    else:
        o.backward(dol)
        grads = [t.grad for t in args]
    tol = 1e-10 if dtype == torch.float64 else 2e-5
    un = lambda x: distattn.unshard(x, schedule=schedule, causal=causal, heads=h, kv_heads=hk)
    errs = [close("o", un(o), o_ref, tol)]
    errs.append(close("lse", un(lse.transpose(1, 2)).transpose(1, 2), lse_ref, tol))
    for name, g, ref in zip(("dq", "dk", "dv"), grads, (dq_ref, dk_ref, dv_ref)):
        errs.append(close(name, un(g), ref, tol * 10))
    return max(errs)


# ---- tests -------------------------------------------------------------------------------

def test_reference_every_schedule():
    """fp64 and fp32, causal and full, every executor with fresh inputs; GQA (4 heads, 2 kv)."""
    lines = []
    for dtype in (torch.float64, torch.float32):
        for causal, scheds in ((True, SCHEDULES_CAUSAL), (False, SCHEDULES_FULL)):
            for s in scheds:
                err = run_case(s, causal, dtype)
                lines.append(f"{s}/{'causal' if causal else 'full'}/{str(dtype)[6:]}: {err:.1e}")
    return "max error " + ", ".join(lines)


def test_window_every_schedule():
    """Key windows (issue #37) against the float64 reference with the windowed mask, forward and
    backward, fp64 and fp32: causal sliding windows W=3 (inside a rank's chunk) and W=11 (wider
    than the 8 tokens a rank holds) on every schedule; bidirectional (4, 2) and (9, 5) with full
    attention on the schedules that compute it; causal with right > 0 clipped to 0."""
    lines = []
    for dtype in (torch.float64, torch.float32):
        for causal, scheds, windows in ((True, SCHEDULES_CAUSAL, (3, (11, 0))),
                                        (False, SCHEDULES_FULL, ((4, 2), (9, 5)))):
            for s in scheds:
                err = max(run_case(s, causal, dtype, window=w) for w in windows)
                lines.append(f"{s}/{'causal' if causal else 'full'}/{str(dtype)[6:]}: {err:.1e}")
    # causal=True clips the right side: (3, 5) is (3, 0)
    for s in ("zigzag", "ulysses", "grid2d-o"):
        run_case(s, True, torch.float64, window=(3, 5), ref_window=(3, 0))
    # sbhd, GQA with an explicit scale, a longer sequence (windows across several ranks' chunks)
    run_case("zigzag", True, torch.float64, layout="sbhd", window=5)
    run_case("ulysses", False, torch.float64, scale=0.3, window=(2, 6))
    run_case("zigzag", True, torch.float64, S=24 * P, window=17)
    return "max error " + ", ".join(lines)


def test_documents_every_schedule():
    """Packed documents (cu_seqlens) against the float64 reference with the block-diagonal
    document mask, forward and backward, fresh random documents per case (a one-token document,
    documents inside a rank's tokens and across ranks): every schedule causal, the full-attention
    schedules without causality, documents + a causal window W=3 and + (2, 5) full, int32 and
    int64 offsets, fp64 and fp32, sbhd and one document = the whole sequence."""
    S = 8 * P
    lines = []
    for dtype in (torch.float64, torch.float32):
        for causal, scheds, window in ((True, SCHEDULES_CAUSAL, None), (False, SCHEDULES_FULL, None),
                                       (True, SCHEDULES_CAUSAL, 3), (False, SCHEDULES_FULL, (2, 5))):
            for s in scheds:
                err = max(run_case(s, causal, dtype, window=window, docs=random_documents(S), docs_dtype=dd)
                          for dd in (torch.int32, torch.int64))
                lines.append(f"{s}/{'causal' if causal else 'full'}/w={window}/{str(dtype)[6:]}: {err:.1e}")
    run_case("zigzag", True, torch.float64, layout="sbhd", docs=random_documents(S))
    run_case("ulysses", False, torch.float64, docs=[0, S])
    run_case("grid2d-o", True, torch.float64, S=24 * P, docs=random_documents(24 * P))
    return "max error " + ", ".join(lines)


def test_documents_change_between_steps():
    """A training loop: every step packs other documents (and one step none) into tensors of one
    shape, so one cached executor per schedule serves them all (the cache does not grow); each
    step's forward and backward match the reference of its documents. Then two batches with
    different documents in one graph: backward runs the second's first, so the first's must set
    its documents back (and run its forward again) to get its own gradients."""
    b, S, h, hk, d = 1, 8 * P, 2 * P, P, 8
    for schedule in ("zigzag", "ulysses", "grid2d-o", "hybrid", "balanced"):
        sh = lambda x: distattn.shard(x, schedule=schedule, heads=h, kv_heads=hk)[0]
        un = lambda x: distattn.unshard(x, schedule=schedule, heads=h, kv_heads=hk)
        first = None
        for step, docs in enumerate((random_documents(S), random_documents(S), None, random_documents(S))):
            q, k, v, do = rand(b, S, h, d), rand(b, S, hk, d), rand(b, S, hk, d), rand(b, S, h, d)
            ins = [sh(t).requires_grad_() for t in (q, k, v)]
            cu = None if docs is None else torch.tensor(docs, dtype=torch.int32)
            o = distattn.attention(*ins, schedule=schedule, cu_seqlens=cu)
            o.backward(sh(do))
            refs = reference_grads(q, k, v, do, docs=docs)
            close(f"{schedule} step {step} o", un(o.detach()), refs[0], 1e-10)
            for name, t, ref in zip(("dq", "dk", "dv"), ins, refs[2:]):
                close(f"{schedule} step {step} {name}", un(t.grad), ref, 1e-9)
            e = _ops._executor_for(ins[0], ins[1], distattn._comm.get(None).id, schedule, True, 0.0, -1, -1)
            first = first or e
            assert e is first, f"{schedule}: a new executor at step {step}"
        docs = [random_documents(S), random_documents(S)]
        q, k, v, do = ([rand(b, S, hh, d) for _ in range(2)] for hh in (h, hk, hk, h))
        ins = [[sh(t).requires_grad_() for t in (q[i], k[i], v[i])] for i in range(2)]
        total = sum((distattn.attention(*ins[i], schedule=schedule, cu_seqlens=torch.tensor(docs[i]))
                     * sh(do[i])).sum() for i in range(2))
        total.backward()
        # batch 0's backward ran last, under its own documents again
        assert torch.equal(e.documents, torch.tensor(docs[0])), (e.documents, docs)
        for i in range(2):
            refs = reference_grads(q[i], k[i], v[i], do[i], docs=docs[i])[2:]
            for name, t, ref in zip(("dq", "dk", "dv"), ins[i], refs):
                close(f"{schedule} interleaved batch {i} {name}", un(t.grad), ref, 1e-9)
    return "zigzag, ulysses, grid2d-o, hybrid, balanced; one executor each"


def test_documents_bad_input():
    """Bad cu_seqlens: the type locally (TypeError/ValueError naming cu_seqlens), the values by
    the library on every rank (DistAttnInvalidArgument naming cu_seqlens and the fault): not
    sorted, not starting at 0, a last offset that is not the sequence length, offsets that
    differ across ranks. Afterwards the executor still computes with good documents."""
    S = 8 * P
    q, k = torch.zeros(1, 8, 2, 4, dtype=torch.float64), torch.zeros(1, 8, 1, 4, dtype=torch.float64)
    A = lambda cu, causal=True: distattn.attention(q, k, k, schedule="zigzag", causal=causal, cu_seqlens=cu)
    expect_error(TypeError, ["cu_seqlens", "float32"], lambda: A(torch.tensor([0.0, S])))
    expect_error(TypeError, ["cu_seqlens", "int16"], lambda: A(torch.tensor([0, S], dtype=torch.int16)))
    expect_error(TypeError, ["cu_seqlens", "list"], lambda: A([0, S]))
    expect_error(ValueError, ["cu_seqlens", "1-D"], lambda: A(torch.tensor([[0, S]])))
    expect_error(ValueError, ["cu_seqlens", "1-D"], lambda: A(torch.tensor([0])))
    bad = distattn.DistAttnInvalidArgument
    expect_error(bad, ["cu_seqlens", "must not decrease", "5 then 3"], lambda: A(torch.tensor([0, 5, 3, S])))
    expect_error(bad, ["cu_seqlens", "first offset must be 0"], lambda: A(torch.tensor([1, S])))
    expect_error(bad, ["cu_seqlens", "last offset", str(S + 1)], lambda: A(torch.tensor([0, S + 1])))
    expect_error(bad, ["cu_seqlens", "last offset", str(S - 1)], lambda: A(torch.tensor([0, S - 1]), causal=False))
    if P > 1:
        expect_error(distattn.DistAttnError, ["cu_seqlens", "hash"],
                     lambda: A(torch.tensor([0, 3 if RANK == 0 else 4, S])))
        expect_error(distattn.DistAttnError, ["num_documents"],
                     lambda: A(torch.tensor([0, 3, S] if RANK == 0 else [0, 3, 5, S])))
        # One rank keeps the offsets its executor holds while the others change theirs: an
        # error on every rank, not ranks left in different collectives (Attention2D's passes
        # agree on a duplicate of the communicator).
        G = lambda cu: distattn.attention(q, k, k, schedule="grid2d-o", cu_seqlens=cu)
        G(torch.tensor([0, 3, S]))
        expect_error(distattn.DistAttnError, ["cu_seqlens", "hash"],
                     lambda: G(torch.tensor([0, 3 if RANK == 0 else 5, S])))
    run_case("zigzag", True, torch.float64, docs=random_documents(S))
    return "type checks local; value checks agreed by the library on every rank"


def test_layout_scale_shapes():
    """sbhd layout, an explicit scale, and shapes changing from call to call (executors cached)."""
    run_case("zigzag", True, torch.float64, layout="sbhd")
    run_case("ulysses", True, torch.float64, scale=0.3)
    for b, S, h, hk, d in ((1, 4 * P, 2, 2, 4), (3, 12 * P, 6, 2, 16), (1, 4 * P, 2, 2, 4)):
        run_case("zigzag", True, torch.float64, b=b, S=S, h=h, hk=hk, d=d)
        run_case("ulysses", True, torch.float64, b=b, S=S, h=2 * P, hk=P, d=d)
    return f"{len(_ops._executors)} executors cached"


def test_gradcheck():
    """torch.autograd.gradcheck in fp64 on small shapes (zigzag, Ulysses, Attention2D; 1 rank),
    without and with a key window (causal W=2; (1, 2) with full attention) on 6 tokens; the
    output against the windowed reference too."""
    if P != 1:
        return "SKIP: gradcheck runs on 1 rank"
    for schedule in ("zigzag", "ulysses", "grid2d-o"):
        for causal, window in ((True, None), (False, None), (True, 2), (False, (1, 2))):
            q = rand(1, 6, 2, 3).requires_grad_()
            k, v = rand(1, 6, 1, 3).requires_grad_(), rand(1, 6, 1, 3).requires_grad_()
            fn = lambda q, k, v: distattn.attention(q, k, v, schedule=schedule, causal=causal, window=window)
            assert torch.autograd.gradcheck(fn, (q, k, v), eps=1e-6, atol=1e-8, rtol=1e-6), (schedule, window)
            un = lambda x: distattn.unshard(x, schedule=schedule, causal=causal)
            o_ref = reference(*(un(t.detach()) for t in (q, k, v)), causal=causal, window=window)[0]
            close(f"{schedule} {causal} {window} o", un(fn(q, k, v).detach()), o_ref, 1e-12)
        for causal in (True, False):  # documents [0, 2), [2, 3), [3, 6)
            q = rand(1, 6, 2, 3).requires_grad_()
            k, v = rand(1, 6, 1, 3).requires_grad_(), rand(1, 6, 1, 3).requires_grad_()
            cu = torch.tensor([0, 2, 3, 6])
            fn = lambda q, k, v: distattn.attention(q, k, v, schedule=schedule, causal=causal, cu_seqlens=cu)
            assert torch.autograd.gradcheck(fn, (q, k, v), eps=1e-6, atol=1e-8, rtol=1e-6), (schedule, "documents")
    return "zigzag, ulysses, grid2d-o; causal and full; unwindowed, windowed, with documents"


def test_stale_saved_inputs():
    """Same storage, new values: backward must use them (issue #35, item 1). Executor E's forward
    saves state for q, k, v; new values are written into the same tensors, o and lse for them come
    from another executor (explicit scale: another cache key), and E's backward must give the
    gradients of the new values. Once with a torch-visible write (the package invalidates), once
    through .data (version counter unchanged: the C ABI's fingerprint catches it)."""
    b, S, h, hk, d = 1, 8 * P, 2 * P, P, 8
    for schedule in ("ulysses", "grid2d-o", "hybrid", "zigzag"):
        for via_data in (False, True):
            sh = lambda x: distattn.shard(x, schedule=schedule, heads=h, kv_heads=hk)[0].contiguous()
            q1, k1, v1 = rand(b, S, h, d), rand(b, S, hk, d), rand(b, S, hk, d)
            q2, k2, v2, do = rand(b, S, h, d), rand(b, S, hk, d), rand(b, S, hk, d), rand(b, S, h, d)
            ql, kl, vl = sh(q1), sh(k1), sh(v1)
            comm = distattn._comm.get(None).id
            _ops.fwd_impl(ql, kl, vl, None, comm, schedule, True, 0.0, -1, -1)  # E saves state for values 1
            for t, new in ((ql, q2), (kl, k2), (vl, v2)):
                (t.data if via_data else t).copy_(sh(new))
            o2, lse2 = _ops.fwd_impl(ql.clone(), kl.clone(), vl.clone(), None, comm, schedule, True,
                                     1.0 / math.sqrt(d), -1, -1)
            dq, dk, dv = _ops.bwd_impl(sh(do), ql, kl, vl, o2, lse2, None, comm, schedule, True, 0.0, -1, -1)
            _, _, dq_ref, dk_ref, dv_ref = reference_grads(q2, k2, v2, do)
            un = lambda x: distattn.unshard(x, schedule=schedule, heads=h, kv_heads=hk)
            for name, g, ref in (("dq", dq, dq_ref), ("dk", dk, dk_ref), ("dv", dv, dv_ref)):
                close(f"{schedule} {'.data' if via_data else 'copy_'} {name}", un(g), ref, 1e-9)
    return "ulysses, grid2d-o, hybrid, zigzag; copy_ and .data writes"


def test_shared_executor_two_layers():
    """Two attention calls of one shape (one cached executor) in one graph, then backward:
    the first call's backward must not use the second's saved state."""
    b, S, h, hk, d = 1, 8 * P, 2 * P, P, 8
    for schedule in ("ulysses", "grid2d-o"):
        sh = lambda x: distattn.shard(x, schedule=schedule, heads=h, kv_heads=hk)[0]
        qs = [rand(b, S, h, d) for _ in range(2)]
        ks = [rand(b, S, hk, d) for _ in range(2)]
        vs = [rand(b, S, hk, d) for _ in range(2)]
        do = rand(b, S, h, d)
        ins = [[sh(t).requires_grad_() for t in (qs[i], ks[i], vs[i])] for i in range(2)]
        o = sum(distattn.attention(*ins[i], schedule=schedule) for i in range(2))
        o.backward(sh(do))
        un = lambda x: distattn.unshard(x, schedule=schedule, heads=h, kv_heads=hk)
        for i in range(2):
            refs = reference_grads(qs[i], ks[i], vs[i], do)[2:]
            for name, t, ref in zip(("dq", "dk", "dv"), ins[i], refs):
                close(f"{schedule} layer {i} {name}", un(t.grad), ref, 1e-9)
    return "ulysses, grid2d-o"


def test_bad_input():
    """Wrong dtype, shape, layout, schedule, options: Python exceptions naming the problem."""
    q, k = torch.zeros(1, 8, 2, 4, dtype=torch.float64), torch.zeros(1, 8, 1, 4, dtype=torch.float64)
    A = distattn.attention
    expect_error(TypeError, ["q", "int64", "float64"], lambda: A(q.long(), k, k))
    expect_error(TypeError, ["k", "float16"], lambda: A(q, k.half(), k))
    expect_error(TypeError, ["one dtype"], lambda: A(q, k.float(), k))
    expect_error(ValueError, ["q", "4 dimensions", "(1, 8, 8)"], lambda: A(q.reshape(1, 8, 8), k, k))
    expect_error(ValueError, ["k", "kv heads", "3"], lambda: A(q, torch.zeros(1, 8, 3, 4, dtype=q.dtype),
                                                                torch.zeros(1, 8, 3, 4, dtype=q.dtype)))
    expect_error(ValueError, ["k and v", "one shape"], lambda: A(q, k, torch.zeros(1, 8, 1, 5, dtype=q.dtype)))
    expect_error(ValueError, ["k", "head_dim"], lambda: A(q, torch.zeros(1, 8, 1, 5, dtype=q.dtype),
                                                          torch.zeros(1, 8, 1, 5, dtype=q.dtype)))
    expect_error(ValueError, ["schedule", "ringg"], lambda: A(q, k, k, schedule="ringg"))
    expect_error(ValueError, ["layout", "bhsd"], lambda: A(q, k, k, layout="bhsd"))
    expect_error(ValueError, ["scale"], lambda: A(q, k, k, scale=-1.0))
    expect_error(NotImplementedError, ["thd", "cu_seqlens"], lambda: A(q, k, k, layout="thd"))
    bad_windows = (-1, -3, (2, -1), (-1, -1), (1,), (1, 2, 3), 2.0, (1.0, 0), "3", True, (True, 0), [None, 1],
                   {1: 2}, 2**63)
    for w in bad_windows:
        expect_error(ValueError, ["window", repr(w)], lambda: A(q, k, k, window=w))
        expect_error(ValueError, ["window", repr(w)], lambda: distattn.DistributedAttention(window=w))
    expect_error(TypeError, ["v", "torch.Tensor"], lambda: A(q, k, [1.0]))
    # Causal-only schedules asked for full attention, and odd local_seq for zigzag: the C ABI
    # refuses on every rank, as DistAttnInvalidArgument (a ValueError).
    expect_error(distattn.DistAttnInvalidArgument, ["causal"], lambda: A(q, k, k, schedule="balanced",
                                                                           causal=False))
    q7, k7 = torch.zeros(1, 7, 2, 4, dtype=torch.float64), torch.zeros(1, 7, 1, 4, dtype=torch.float64)
    expect_error(distattn.DistAttnInvalidArgument, ["local_seq"], lambda: A(q7, k7, k7, schedule="zigzag"))
    if P > 1:
        # Ranks disagreeing on the shape: the executor's creation fails on every rank, naming it.
        qr = torch.zeros(1, 8 + 2 * RANK, 2, 4, dtype=torch.float64)
        kr = torch.zeros(1, 8 + 2 * RANK, 1, 4, dtype=torch.float64)
        expect_error(distattn.DistAttnError, ["local_seq"], lambda: A(qr, kr, kr, schedule="zigzag"))
    # and the package still works afterwards
    run_case("zigzag", True, torch.float64)
    return f"{12 + 2 * len(bad_windows)} local checks, C ABI errors on every rank"


def test_fake_and_module():
    """Fake (meta) implementations give the output shapes; the nn.Module; shard/unshard round trip
    and the position ids cover the sequence once."""
    q = torch.empty(2, 6, 4, 8, device="meta", dtype=torch.float32)
    k = torch.empty(2, 6, 2, 8, device="meta", dtype=torch.float32)
    o, lse = torch.ops.distattn.attention_fwd(q, k, k, None, 1, "zigzag", True, 0.0, 3, 0)
    assert o.shape == q.shape and o.device.type == "meta" and lse.shape == (2, 4, 6) and lse.dtype == torch.float32
    dq, dk, dv = torch.ops.distattn.attention_bwd(o, q, k, k, o, lse, None, 1, "zigzag", True, 0.0, 3, 0)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == k.shape
    m = distattn.DistributedAttention(schedule="zigzag")
    S = 8 * P
    x = rand(2, S, 4, 8)
    for s in SCHEDULES_CAUSAL:
        xl, pos = distattn.shard(x, schedule=s)
        allpos = torch.cat(COMM.allgather(pos))
        assert sorted(allpos.tolist()) == list(range(S)), f"{s}: positions {allpos.tolist()}"
        assert torch.equal(distattn.unshard(xl, schedule=s), x), s
    q, k, v = (distattn.shard(rand(2, S, 4, 8), schedule="zigzag")[0] for _ in range(3))
    assert torch.equal(m(q, k, v), distattn.attention(q, k, v, schedule="zigzag"))
    mw = distattn.DistributedAttention(schedule="zigzag", window=3)
    assert "window=3" in repr(mw), repr(mw)
    ow = mw(q, k, v)
    assert torch.equal(ow, distattn.attention(q, k, v, schedule="zigzag", window=(3, 0)))
    close("module window=3", distattn.unshard(ow, schedule="zigzag"),
          reference(*(distattn.unshard(t, schedule="zigzag") for t in (q, k, v)), window=3)[0], 1e-10)
    return f"{'custom_op' if distattn.USE_CUSTOM_OP else 'Library + autograd.Function'} path, torch {torch.__version__}"


def test_custom_op_path():
    """torch >= 2.4: torch.library.opcheck of both ops (fake, autograd registration)."""
    if not distattn.USE_CUSTOM_OP:
        return f"SKIP: needs torch >= 2.4 (torch.library.custom_op), have {torch.__version__}"
    q = distattn.shard(rand(1, 8 * P, 2, 4), schedule="zigzag")[0].requires_grad_()
    k = distattn.shard(rand(1, 8 * P, 1, 4), schedule="zigzag")[0].requires_grad_()
    comm = distattn._comm.get(None).id
    for cu in (None, torch.tensor([0, 3, 8 * P], dtype=torch.int32)):
        for w in ((-1, -1), (3, 0)):
            torch.library.opcheck(torch.ops.distattn.attention_fwd.default,
                                  (q, k, k, cu, comm, "zigzag", True, 0.0) + w,
                                  test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))
    return "opcheck passed (unbounded and window (3, 0); without and with documents)"


def test_torch_group():
    """The caller's torch.distributed group (gloo) becomes an MPI sub-communicator: torch ranks in
    the reverse order of MPI's, the default group, an explicit group, and one-rank groups."""
    import torch.distributed as dist
    port = None
    if RANK == 0:  # a free port of this machine (the ranks of these tests share one machine)
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = COMM.bcast(port, root=0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=P - 1 - RANK, world_size=P)
    try:
        trank = dist.get_rank()
        singles = [dist.new_group([r]) for r in range(P)]
        everyone = dist.new_group(list(range(P)))
        b, S, h, hk, d = 1, 8 * P, 2 * P, P, 8
        q, k, v, do = rand(b, S, h, d), rand(b, S, hk, d), rand(b, S, hk, d), rand(b, S, h, d)
        o_ref, _, dq_ref, _, _ = reference_grads(q, k, v, do)
        for group in (None, everyone):
            for s in ("zigzag", "ulysses"):
                ql, pos = distattn.shard(q, group, schedule=s)
                kl, vl, dol = (distattn.shard(t, group, schedule=s)[0] for t in (k, v, do))
                ql.requires_grad_()
                o = distattn.attention(ql, kl, vl, group=group, schedule=s)
                o.backward(dol)
                assert torch.equal(distattn.token_positions(S, group, schedule=s, rank=trank), pos)
                close(f"{s} o", distattn.unshard(o, group, schedule=s), o_ref, 1e-10)
                close(f"{s} dq", distattn.unshard(ql.grad, group, schedule=s), dq_ref, 1e-9)
        # groups of two ranks, torch ranks {0,1}, {2,3}, ... (4 ranks or more): MPI sub-communicators
        pairs = [dist.new_group([2 * i, 2 * i + 1]) for i in range(P // 2)]
        if P >= 4:
            pair = pairs[trank // 2]
            q2, k2, v2 = rand(1, 16, 4, 8), rand(1, 16, 2, 8), rand(1, 16, 2, 8)
            for s in ("zigzag", "ulysses"):
                parts = [distattn.shard(t, pair, schedule=s)[0] for t in (q2, k2, v2)]
                o = distattn.attention(*parts, group=pair, schedule=s)
                close(f"pair group {s} o", distattn.unshard(o, pair, schedule=s), reference(q2, k2, v2)[0], 1e-10)
        # a one-rank group: this rank alone, over its local sequence
        mine = singles[trank]
        ql, kl, vl = q[:, :8].clone(), k[:, :8].clone(), v[:, :8].clone()
        o = distattn.attention(ql, kl, vl, group=mine, schedule="zigzag")
        close("one-rank group o", o, reference(ql, kl, vl)[0], 1e-10)
        c = distattn._comm.get(None)
        assert c.size == P and c.rank == trank, (c.size, c.rank, trank)
    finally:
        dist.destroy_process_group()
    return f"torch rank {trank} = MPI rank {RANK}"


TESTS = [test_bad_input, test_fake_and_module, test_reference_every_schedule, test_window_every_schedule,
         test_documents_every_schedule, test_documents_change_between_steps, test_documents_bad_input,
         test_layout_scale_shapes,
         test_gradcheck, test_stale_saved_inputs, test_shared_executor_two_layers, test_custom_op_path,
         test_torch_group]


def main():
    names = sys.argv[1:]
    if RANK == 0:
        print(f"distattn {distattn.library_version()}, torch {torch.__version__}, {P} rank(s), seed {SEED}",
              flush=True)
    for t in TESTS:
        if names and t.__name__ not in names:
            continue
        t0 = time.time()
        try:
            note = t()
        except Exception:
            print(f"[rank {RANK}] FAIL {t.__name__} (seed {SEED}):\n{traceback.format_exc()}", flush=True)
            COMM.Abort(1)
        COMM.Barrier()
        if RANK == 0:
            print(f"PASS {t.__name__} ({time.time() - t0:.1f} s){': ' + note if note else ''}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
