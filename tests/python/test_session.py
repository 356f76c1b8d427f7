# fusor.InferenceSession against ONNX Runtime and against itself: parity on filled bundled models,
# the onnxruntime-shaped API, input conversion, errors and concurrent runs.
import threading

import numpy as np
import pytest

import fusor
from conftest import filled_model, random_feed

# (model, its symbolic dims bound for both runtimes): convolutions, EfficientNetV2-S's 35 residual
# blocks of SiLU and squeeze-excitation gates (where unbounded activations flip gates on rounding),
# a decoder with token-id inputs and an encoder with symbolic dims, a fast subset;
# bench/python_onnxruntime_parity.py checks every bundled model (docs/python.md keeps its table).
PARITY_MODELS = [("squeezenet1_1", {}), ("efficientnet_v2_s", {}), ("gpt_decoder_4l", {}),
                 ("distil_encoder_dynamic", {"batch": 2, "seq": 16})]


def assert_close(actual, expected):
    """Within 1e-4 relative to the output's largest magnitude (elementwise relative error is
    meaningless for outputs near zero)."""
    scale = float(np.max(np.abs(expected))) or 1.0
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("model,dims", PARITY_MODELS)
def test_outputs_match_onnx_runtime_within_1e4_relative(model, dims):
    ort = pytest.importorskip(
        "onnxruntime", reason="onnxruntime is not installed for this Python (deploy/install-deps.sh "
                              "installs it into /usr/bin/python3)")
    path = filled_model(model)
    ours = fusor.InferenceSession(str(path), dims=dims)
    theirs = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in ours.get_inputs()] == [i.name for i in theirs.get_inputs()]
    assert [o.name for o in ours.get_outputs()] == [o.name for o in theirs.get_outputs()]
    assert [i.type for i in ours.get_inputs()] == [i.type for i in theirs.get_inputs()]
    feed = random_feed(ours)
    for got, want in zip(ours.run(None, feed), theirs.run(None, feed)):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert_close(got, want)


def test_bytes_load_like_a_path(squeezenet):
    by_path = fusor.InferenceSession(squeezenet)
    by_bytes = fusor.InferenceSession(squeezenet.read_bytes())
    feed = random_feed(by_path)
    np.testing.assert_array_equal(by_bytes.run(None, feed)[0], by_path.run(None, feed)[0])


def test_non_contiguous_and_float64_inputs_give_the_contiguous_float32_result(squeezenet):
    session = fusor.InferenceSession(squeezenet)
    x = random_feed(session)["input"]
    expected = session.run(["output"], {"input": x})[0]
    transposed = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    assert not transposed.flags.c_contiguous
    np.testing.assert_array_equal(session.run(["output"], {"input": transposed})[0], expected)
    np.testing.assert_array_equal(session.run(["output"], {"input": x.astype(np.float64)})[0],
                                  expected)
    np.testing.assert_array_equal(session.run(["output"], {"input": memoryview(x)})[0], expected)


def test_outputs_of_one_run_are_not_overwritten_by_the_next(squeezenet):
    session = fusor.InferenceSession(squeezenet)
    first = session.run(None, random_feed(session, seed=1))[0]
    kept = first.copy()
    second = session.run(None, random_feed(session, seed=2))[0]
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, kept)
    assert not np.array_equal(first, second)


@pytest.mark.parametrize("concurrent_runs", [1, 4])
def test_several_threads_running_one_session_get_the_single_threaded_outputs(squeezenet,
                                                                            concurrent_runs):
    session = fusor.InferenceSession(squeezenet, threads=1, concurrent_runs=concurrent_runs)
    feeds = [random_feed(session, seed=s) for s in range(4)]
    expected = [session.run(None, f)[0] for f in feeds]
    results = {}

    def worker(k):
        results[k] = [session.run(None, feeds[(k + r) % 4])[0] for r in range(3)]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        for r in range(3):
            np.testing.assert_array_equal(results[k][r], expected[(k + r) % 4])


def test_an_io_binding_reads_and_writes_the_callers_arrays_in_place(squeezenet):
    session = fusor.InferenceSession(squeezenet)
    x = random_feed(session, seed=1)["input"]
    binding = session.io_binding()
    binding.bind_cpu_input("input", x)
    binding.bind_output("output")
    session.run_with_iobinding(binding)
    (out,) = binding.get_outputs()
    np.testing.assert_array_equal(out, session.run(None, {"input": x})[0])
    assert binding.copied_bytes == 0
    # The next run reads the input's new values where they are and overwrites the same array.
    x[...] = random_feed(session, seed=2)["input"]
    kept = out.copy()
    session.run_with_iobinding(binding)
    assert not np.array_equal(out, kept)
    np.testing.assert_array_equal(out, session.run(None, {"input": x})[0])
    assert not np.shares_memory(binding.copy_outputs_to_cpu()[0], out)


def test_an_io_binding_converts_a_float64_input_and_counts_the_copy(squeezenet):
    session = fusor.InferenceSession(squeezenet)
    x = random_feed(session)["input"]
    binding = session.io_binding()
    binding.bind_cpu_input("input", x.astype(np.float64))
    out = np.empty(session.get_outputs()[0].shape, np.float32)
    binding.bind_output("output", out)
    session.run_with_iobinding(binding)
    np.testing.assert_array_equal(out, session.run(None, {"input": x})[0])
    assert binding.copied_bytes == x.size * 8


def test_a_missing_model_raises_fusor_error_with_the_cli_message():
    with pytest.raises(fusor.FusorError, match="model file '/nonexistent.onnx' does not exist") as e:
        fusor.InferenceSession("/nonexistent.onnx")
    assert e.value.code == "NotFound" and e.value.exit_code == 1


def test_a_wrong_input_name_is_an_invalid_argument_naming_the_inputs(squeezenet):
    session = fusor.InferenceSession(squeezenet)
    x = random_feed(session)["input"]
    with pytest.raises(fusor.InvalidArgumentError,
                       match=r"'nosuch' is not an input of the model \(its inputs: 'input'\)") as e:
        session.run(None, {"nosuch": x})
    assert isinstance(e.value, ValueError) and e.value.exit_code == 4


def test_float16_and_int_feeds_convert_in_the_engine(squeezenet):
    session = fusor.InferenceSession(squeezenet)
    x = random_feed(session)["input"].astype(np.float16)
    expected = session.run(None, {"input": x.astype(np.float32)})[0]
    np.testing.assert_array_equal(session.run(None, {"input": x})[0], expected)
    ints = np.arange(12, dtype=np.int64).reshape(1, 3, 2, 2)
    with pytest.raises(fusor.InvalidArgumentError, match=r"input 'input' needs float32"):
        session.run(None, {"input": ints})


def test_a_wrong_output_name_is_an_invalid_argument_naming_the_outputs(squeezenet):
    session = fusor.InferenceSession(squeezenet)
    with pytest.raises(fusor.InvalidArgumentError,
                       match=r"'logits' is not an output of the model \(its outputs: 'output'\)"):
        session.run(["logits"], random_feed(session))


def test_a_complex_input_is_refused_naming_its_dtype(squeezenet):
    session = fusor.InferenceSession(squeezenet)
    x = random_feed(session)["input"].astype(np.complex64)
    with pytest.raises(fusor.InvalidArgumentError, match="input 'input' has dtype complex64"):
        session.run(None, {"input": x})


def test_bool_and_int32_outputs_have_the_dtypes_onnx_runtime_gives():
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed for this Python")
    from onnx import TensorProto, helper, numpy_helper
    zero = numpy_helper.from_array(np.zeros(1, np.float32), "zero")
    nodes = [helper.make_node("Greater", ["x", "zero"], ["positive"]),
             helper.make_node("Cast", ["x"], ["as_int32"], to=TensorProto.INT32)]
    graph = helper.make_graph(
        nodes, "dtypes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("positive", TensorProto.BOOL, [2, 3]),
         helper.make_tensor_value_info("as_int32", TensorProto.INT32, [2, 3])], [zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    ours = fusor.InferenceSession(model)
    assert [o.type for o in ours.get_outputs()] == ["tensor(bool)", "tensor(int32)"]
    feed = {"x": np.array([[-1.5, 0, 2.5], [3, -4, 5]], np.float32)}
    for got, want in zip(ours.run(None, feed), ort.InferenceSession(model).run(None, feed)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
