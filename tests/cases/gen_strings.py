"""String tensors' cases: the ops the core runs on the host for strings (core/ops/strings.cpp),
expected values from onnxruntime. Strings are numpy object arrays of str, as onnxruntime takes
and returns them."""
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from casegen import Cases

ML = "ai.onnx.ml"
c = Cases("strings")


def strings(*values, shape=None):
    a = np.array(values, dtype=object)
    return a.reshape(shape) if shape is not None else a


def value_info(name, arr):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape)


def graph_case(name, nodes, inputs, outputs, opsets, initializers=None, reference=False):
    """A model of `nodes`; expected outputs from onnxruntime (reference: from onnx's reference
    implementation), whose answers declare the outputs' types."""
    graph = helper.make_graph(nodes, name, [value_info(k, v) for k, v in inputs.items()],
                              [helper.make_empty_tensor_value_info(o) for o in outputs],
                              [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    model.ir_version = 9
    if reference:
        got = ReferenceEvaluator(model).run(outputs, inputs)
    else:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        got = ort.InferenceSession(model.SerializeToString(), so,
                                   providers=["CPUExecutionProvider"]).run(outputs, inputs)
    for o, v in zip(model.graph.output, got):
        o.CopyFrom(value_info(o.name, np.asarray(v)))
    c.whole(name, model, inputs, expected=dict(zip(outputs, got)))


def one_node(name, op_type, inputs, outputs, opset=20, ml_opset=None, reference=False, **attrs):
    node = helper.make_node(op_type, list(inputs), outputs, domain=ML if ml_opset else "", **attrs)
    graph_case(name, [node], inputs, outputs, {"": opset, **({ML: ml_opset} if ml_opset else {})},
               reference=reference)


# Cast to and from string (onnxruntime's formats: "%.8g", NaN, INF).
x = np.array([1.0, 0.1, 1e-5, 1e20, -0.0, np.nan, -np.inf, 1 / 3, 123456789], np.float32)
one_node("cast_float_to_string", "Cast", {"x": x}, ["y"], opset=17, to=TensorProto.STRING)
one_node("cast_double_to_string", "Cast", {"x": x.astype(np.float64) / 3}, ["y"], opset=17,
         to=TensorProto.STRING)
for dt in (np.int64, np.int32, np.int8, np.uint8, np.uint64, np.bool_):
    one_node(f"cast_{np.dtype(dt).name}_to_string", "Cast",
             {"x": np.array([0, 1, 7, 100, 3], dtype=dt)}, ["y"], opset=17, to=TensorProto.STRING)
one_node("cast_string_to_float", "Cast",
         {"x": strings("1.5", "nan", "-INF", " 2", "1e3", "-0.25", shape=(2, 3))}, ["y"], opset=17,
         to=TensorProto.FLOAT)
one_node("cast_string_to_double", "Cast", {"x": strings("0.1", "1e300", "-7")}, ["y"], opset=17,
         to=TensorProto.DOUBLE)
one_node("cast_string_to_int64", "Cast", {"x": strings("12", "-3", "0")}, ["y"], opset=17,
         to=TensorProto.INT64)
one_node("cast_string_to_string", "Cast", {"x": strings("a", "")}, ["y"], opset=17,
         to=TensorProto.STRING)

# StringNormalizer (onnx's reference: onnxruntime's needs the en_US.UTF-8 locale installed).
words = strings("Monday", "tuesday", "wednesday", "MONDAY", "Thursday", shape=(1, 5))
one_node("normalizer_lower_stop", "StringNormalizer", {"x": words}, ["y"], opset=17, reference=True,
         case_change_action="LOWER", is_case_sensitive=0, stopwords=["monday"])
one_node("normalizer_upper_sensitive", "StringNormalizer", {"x": words.reshape(5)}, ["y"], opset=17,
         reference=True, case_change_action="UPPER", is_case_sensitive=1, stopwords=["Monday"])
one_node("normalizer_none", "StringNormalizer", {"x": words.reshape(5)}, ["y"], opset=17,
         reference=True)
one_node("normalizer_all_stopped", "StringNormalizer", {"x": strings("a", "A", shape=(1, 2))}, ["y"],
         opset=17, reference=True, case_change_action="LOWER", is_case_sensitive=0, stopwords=["a"])

# StringConcat (broadcasting), RegexFullMatch, StringSplit, Equal on strings.
one_node("concat", "StringConcat", {"x": strings("a", "bc", "", "ü"), "y": strings("1", "", "x", "é")},
         ["z"])
one_node("concat_broadcast", "StringConcat",
         {"x": strings("a", "b", shape=(2, 1)), "y": strings("-x", "-y", "-z")}, ["z"])
one_node("concat_scalar", "StringConcat", {"x": strings("pre", shape=()), "y": strings("a", "b")},
         ["z"])
one_node("regex_full_match", "RegexFullMatch",
         {"x": strings("www.google.com", "www.facebook.com", "www.bbc.co.uk", "google.com")},
         ["y"], pattern=r"www\.[\w.-]+\.\bcom\b")
one_node("regex_digits", "RegexFullMatch", {"x": strings("123", "12a", "", "007", shape=(2, 2))},
         ["y"], pattern=r"[0-9]+")
one_node("split_delimiter", "StringSplit", {"x": strings("a,b,c", "d", "", "e,,f")}, ["y", "z"],
         delimiter=",")
one_node("split_whitespace", "StringSplit",
         {"x": strings("  hello   world ", "one", "a b c d", shape=(3,))}, ["y", "z"])
one_node("split_maxsplit", "StringSplit", {"x": strings("1-2-3-4", "5-6", shape=(1, 2))}, ["y", "z"],
         delimiter="-", maxsplit=2)
one_node("split_whitespace_maxsplit", "StringSplit", {"x": strings(" a b c ", "a  b", "")}, ["y", "z"],
         maxsplit=1)
one_node("split_multichar", "StringSplit", {"x": strings("a::b::c", "::")}, ["y", "z"],
         delimiter="::")
one_node("equal_strings", "Equal", {"a": strings("a", "b", "c"), "b": strings("a", "x", "c")}, ["y"],
         opset=19)
one_node("equal_strings_broadcast", "Equal", {"a": strings("a", "b", shape=(2, 1)),
                                              "b": strings("a", "b", "c")}, ["y"], opset=19)
one_node("identity_strings", "Identity", {"x": strings("p", "q", shape=(1, 2))}, ["y"], opset=17)

# ai.onnx.ml: CategoryMapper both ways, LabelEncoder with string keys or values.
cats = dict(cats_strings=["cat", "dog", "bird"], cats_int64s=[0, 1, 2])
one_node("category_mapper_to_int", "CategoryMapper",
         {"x": strings("dog", "cat", "fish", "bird", shape=(2, 2))}, ["y"], opset=17, ml_opset=1,
         default_int64=-7, **cats)
one_node("category_mapper_to_string", "CategoryMapper", {"x": np.array([2, 0, 5, 1], np.int64)},
         ["y"], opset=17, ml_opset=1, default_string="none", **cats)
one_node("one_hot_encoder_strings", "OneHotEncoder", {"x": strings("dog", "cat", "fish", "bird", "cat", "dog",
                                                                  shape=(2, 3))},
         ["y"], opset=17, ml_opset=1, cats_strings=["cat", "dog", "bird"])
one_node("one_hot_encoder_strings_column", "OneHotEncoder", {"x": strings("b", "a", "c", "", shape=(4, 1))},
         ["y"], opset=17, ml_opset=1, cats_strings=["", "a", "b"], zeros=1)
# Gather on strings: columns out of a categorical input (as skl2onnx writes it), rows, negative
# and scalar indices.
words = strings("a", "bb", "", "ccc", "d", "ee", shape=(2, 3))
one_node("gather_strings_columns", "Gather", {"x": words, "i": np.array([2, 0], np.int64)}, ["y"], opset=17,
         axis=1)
# Whole rows against onnx's reference: onnxruntime 1.32.0 copies only the first string of each
# row (it gives [["ccc", "", ""]] for row 1 of these words).
one_node("gather_strings_rows_negative", "Gather", {"x": words, "i": np.array([[-1], [0]], np.int32)}, ["y"],
         opset=17, reference=True)
one_node("gather_strings_scalar_index", "Gather", {"x": words, "i": np.array(-2, np.int64)}, ["y"], opset=17,
         axis=-1)
one_node("label_encoder_string_int", "LabelEncoder", {"x": strings("a", "b", "zz", "c")}, ["y"],
         opset=17, ml_opset=2, keys_strings=["a", "b", "c"], values_int64s=[1, 2, 3],
         default_int64=-1)
one_node("label_encoder_int_string", "LabelEncoder", {"x": np.array([[3, 1], [9, 2]], np.int64)},
         ["y"], opset=17, ml_opset=2, keys_int64s=[1, 2, 3], values_strings=["x", "y", "z"],
         default_string="?")
one_node("label_encoder_v1_to_int", "LabelEncoder", {"x": strings("b", "a", "q")}, ["y"], opset=17,
         ml_opset=1, classes_strings=["a", "b"], default_int64=-5)
one_node("label_encoder_v1_to_string", "LabelEncoder", {"x": np.array([1, 0, 4], np.int64)}, ["y"],
         opset=17, ml_opset=1, classes_strings=["a", "b"], default_string="none")
one_node("label_encoder_string_string", "LabelEncoder", {"x": strings("a", "q")}, ["y"], opset=17,
         ml_opset=2, keys_strings=["a"], values_strings=["A"])
one_node("label_encoder_float_string", "LabelEncoder",
         {"x": np.array([0.5, np.nan, 2.0], np.float32)}, ["y"], opset=17, ml_opset=2,
         keys_floats=[0.5, np.nan], values_strings=["half", "missing"])  # NaN matches nothing
one_node("label_encoder_float_string_v4", "LabelEncoder",
         {"x": np.array([0.5, np.nan, 2.0], np.float32)}, ["y"], opset=17, ml_opset=4,
         keys_floats=[0.5, np.nan], values_strings=["half", "missing"])  # NaN matches NaN
one_node("label_encoder_string_float", "LabelEncoder", {"x": strings("a", "b")}, ["y"], opset=17,
         ml_opset=2, keys_strings=["a"], values_floats=[0.25])
one_node("label_encoder_tensor_strings", "LabelEncoder", {"x": strings("k1", "k2", "k3")}, ["y"],
         opset=17, ml_opset=4,
         keys_tensor=helper.make_tensor("keys", TensorProto.STRING, [2], [b"k1", b"k3"]),
         values_tensor=helper.make_tensor("values", TensorProto.INT16, [2], [10, 30]),
         default_tensor=helper.make_tensor("default", TensorProto.INT16, [1], [-1]))

# Host steps between CPU patches: strings in, numbers through the CPU backend, strings out, and
# a string initializer.
pipeline = [
    helper.make_node("LabelEncoder", ["words"], ["ids"], domain=ML, keys_strings=["a", "b", "c"],
                     values_int64s=[1, 2, 3]),
    helper.make_node("Mul", ["ids", "two"], ["doubled"]),
    helper.make_node("Cast", ["doubled"], ["text"], to=TensorProto.STRING),
    helper.make_node("StringConcat", ["prefix", "text"], ["out"]),
]
graph_case("pipeline_host_cpu_host", pipeline, {"words": strings("a", "c", "b", "x")}, ["doubled", "out"],
           {"": 20, ML: 2}, initializers={"two": np.array(2, np.int64), "prefix": strings("n=", shape=())})

# The text ops of skl2onnx's TfidfVectorizer and CountVectorizer: Reshape and Flatten of strings,
# com.microsoft's Tokenizer (onnxruntime's contrib op), TfIdfVectorizer on strings.
MS = "com.microsoft"
text = strings("Hello, world! ab", "", "x  y,z", "über straße", shape=(4,))


def tokenizer(name, x, **attrs):
    node = helper.make_node("Tokenizer", ["x"], ["y"], domain=MS, pad_value="#", **attrs)
    graph_case(name, [node], {"x": x}, ["y"], {"": 17, MS: 1})


tokenizer("tokenizer_tokenexp", text, tokenexp="[a-zA-Z0-9_]+", mark=0, mincharnum=1)
tokenizer("tokenizer_tokenexp_mark_mincharnum", text, tokenexp="[a-zA-Z0-9_]+", mark=1, mincharnum=2)
tokenizer("tokenizer_separators_2d", text.reshape(2, 2), separators=[" ", ","], mark=0, mincharnum=1)
tokenizer("tokenizer_separators_mark", strings("a--b", "-c-"), separators=["-"], mark=1, mincharnum=1)
tokenizer("tokenizer_chars", text, separators=[""], mark=0, mincharnum=1)
tokenizer("tokenizer_all_empty", strings("", ""), tokenexp="[a-z]+", mark=1, mincharnum=1)
# One character class repeated is tokenized as runs of its bytes, without the regex; the rest
# (the last case) through it. Against onnxruntime (RE2), on ASCII and UTF-8 text.
words = strings("Hello, world! ab_c 42", "", "x  y,z-w 0xff", "über straße!", "a\tb\nc", shape=(5,))
tokenizer("tokenizer_run_word_escape", words, tokenexp="\\w+", mark=0, mincharnum=1)
tokenizer("tokenizer_run_negated", words, tokenexp="[^ ,!]+", mark=1, mincharnum=1)
tokenizer("tokenizer_run_escapes_ranges", words, tokenexp="[\\d\\-a-f]+", mark=0, mincharnum=2)
tokenizer("tokenizer_run_not_space", words, tokenexp="\\S+", mark=0, mincharnum=1)
tokenizer("tokenizer_regex_not_a_run", words, tokenexp="[a-z]+o", mark=0, mincharnum=1)
graph_case("reshape_flatten_strings",
           [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Flatten", ["r"], ["f"], axis=2)],
           {"x": text.reshape(2, 2)}, ["r", "f"], {"": 17},
           initializers={"shape": np.array([1, -1, 2], np.int64)})
pool = dict(pool_strings=["ab", "world", "hello", "x", "world", "ab", "hello", "world"],
            ngram_counts=[0, 4], ngram_indexes=[0, 1, 2, 3, 4, 5], min_gram_length=1,
            max_gram_length=2, max_skip_count=1)
tokens = strings("hello", "world", "ab", "world", "x", "hello", "ab", "q", shape=(2, 4))
for mode in ("TF", "IDF", "TFIDF"):
    weights = dict(weights=[0.5, 1.0, 2.0, 1.5, 3.0, 0.25]) if mode != "TF" else {}
    one_node(f"tfidf_strings_{mode.lower()}", "TfIdfVectorizer", {"x": tokens}, ["y"], opset=17,
             mode=mode, **pool, **weights)
one_node("tfidf_strings_1d", "TfIdfVectorizer", {"x": tokens[0]}, ["y"], opset=17, mode="TF", **pool)


def text_pipeline():
    """skl2onnx's TfidfVectorizer + LogisticRegression on a few sentences: Reshape, StringNormalizer,
    Tokenizer, Flatten, TfIdfVectorizer on strings, Mul, Normalizer, LinearClassifier."""
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    docs = ["The match was won by the home team", "Bake the bread in a hot oven",
            "Stock prices fell as the bank raised rates", "The team scored a late goal",
            "Add sugar and butter, then bake", "Interest rates and the stock market",
            "A goal in the last minute of the match", "The oven was too hot for the cake"]
    y = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    x = np.array(docs + ["Nothing we know", "", "BANK STOCK, GOAL!"], dtype=object).reshape(-1, 1)
    for name, vectorizer in (("text_tfidf_logistic", TfidfVectorizer(ngram_range=(1, 2))),
                             ("text_counts_logistic", CountVectorizer())):
        model = to_onnx(make_pipeline(vectorizer, LogisticRegression()).fit(np.array(docs), y),
                        initial_types=[("text", StringTensorType([None, 1]))],
                        options={LogisticRegression: {"zipmap": False},
                                 type(vectorizer): {"locale": "C.UTF-8"}})  # en_US may be missing
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        c.whole(name, model, {"text": x}, expected=dict(zip(names, sess.run(None, {"text": x}))))


text_pipeline()
