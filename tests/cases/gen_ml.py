"""Cases of the ai.onnx.ml domain, checked against onnxruntime: scikit-learn estimators trained
here on generated or scikit-learn-bundled data and converted by skl2onnx (classifiers without
ZipMap, so their probabilities are a tensor), and single nodes built with onnx's helper for the
attribute combinations converters rarely emit (aggregate functions, post-transforms, base values,
missing-value tracks, branch modes, binary-classifier conventions)."""
import warnings

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from casegen import RNG, Cases, rand, randint

warnings.filterwarnings("ignore")
c = Cases("ml")
ML = "ai.onnx.ml"


# ---- scikit-learn estimators converted by skl2onnx ----

def sk(name, estimator, x_train, y_train, x_test, rtol=1e-5, atol=1e-5, **options):
    """Fits the estimator and writes its skl2onnx model with x_test as the input. The model is
    as skl2onnx writes it: a multi-target forest's output declared [N, 1], which Quilt runs with
    the [N, targets] it infers, as onnxruntime does."""
    from skl2onnx import to_onnx
    estimator.fit(x_train, y_train)
    dtype = np.float32
    try:  # classifiers: probabilities as a tensor (no ZipMap)
        model = to_onnx(estimator, x_train[:1].astype(dtype), options={"zipmap": False, **options},
                        target_opset={"": 17, ML: 3})
    except (NameError, RuntimeError):  # an estimator without the option
        model = to_onnx(estimator, x_train[:1].astype(dtype), target_opset={"": 17, ML: 3})
    c.whole(name, model, {model.graph.input[0].name: x_test.astype(dtype)}, rtol=rtol, atol=atol)


def sk_data():
    from sklearn.datasets import load_iris, make_classification, make_regression
    iris = load_iris()
    xi, yi = iris.data.astype(np.float32), iris.target.astype(np.int64)
    xb, yb = make_classification(300, 8, n_informative=5, random_state=0)
    xr, yr = make_regression(300, 6, n_targets=1, noise=0.5, random_state=0)
    xm, ym = make_regression(300, 5, n_targets=3, noise=0.5, random_state=1)
    return (xi, yi), (xb.astype(np.float32), yb.astype(np.int64) * 3 + 2), \
        (xr.astype(np.float32), yr.astype(np.float32)), (xm.astype(np.float32), ym.astype(np.float32))


def sk_cases():
    from sklearn import ensemble, linear_model, preprocessing, svm, tree
    from sklearn.pipeline import make_pipeline
    (xi, yi), (xb, yb), (xr, yr), (xm, ym) = sk_data()
    te = lambda x: x[::3]  # noqa: E731  rows to run (the models see them in training too)
    # Tree ensembles: multiclass, binary (labels 2 and 5), regression, multi-target.
    sk("sk_random_forest_iris", ensemble.RandomForestClassifier(20, max_depth=6, random_state=0), xi, yi, xi)
    sk("sk_random_forest_binary", ensemble.RandomForestClassifier(15, max_depth=5, random_state=0), xb, yb, te(xb))
    sk("sk_decision_tree_iris", tree.DecisionTreeClassifier(max_depth=4, random_state=0), xi, yi, xi)
    sk("sk_extra_trees_binary", ensemble.ExtraTreesClassifier(10, max_depth=6, random_state=0), xb, yb, te(xb))
    sk("sk_gradient_boosting_iris", ensemble.GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0),
       xi, yi, xi)
    sk("sk_gradient_boosting_binary", ensemble.GradientBoostingClassifier(n_estimators=20, max_depth=3,
                                                                         random_state=0), xb, yb, te(xb))
    sk("sk_random_forest_regressor", ensemble.RandomForestRegressor(20, max_depth=6, random_state=0), xr, yr, te(xr),
       rtol=1e-4, atol=1e-3)
    sk("sk_random_forest_regressor_multi", ensemble.RandomForestRegressor(10, max_depth=5, random_state=0), xm, ym,
       te(xm), rtol=1e-4, atol=1e-3)
    sk("sk_gradient_boosting_regressor", ensemble.GradientBoostingRegressor(n_estimators=30, max_depth=3,
                                                                           random_state=0), xr, yr, te(xr),
       rtol=1e-4, atol=1e-3)
    # Linear models, in a scaler pipeline.
    sk("sk_logistic_regression_iris", make_pipeline(preprocessing.StandardScaler(),
                                                    linear_model.LogisticRegression(max_iter=500)), xi, yi, xi)
    sk("sk_logistic_regression_binary", make_pipeline(preprocessing.MinMaxScaler(),
                                                      linear_model.LogisticRegression(max_iter=500)), xb, yb, te(xb))
    sk("sk_linear_regression", make_pipeline(preprocessing.StandardScaler(), linear_model.LinearRegression()),
       xr, yr, te(xr), rtol=1e-4, atol=1e-3)
    sk("sk_ridge_multi", make_pipeline(preprocessing.MaxAbsScaler(), linear_model.Ridge()), xm, ym, te(xm),
       rtol=1e-4, atol=1e-3)
    sk("sk_sgd_classifier_iris", linear_model.SGDClassifier(random_state=0), xi, yi, xi, rtol=1e-4, atol=1e-4)
    sk("sk_normalizer_l2", make_pipeline(preprocessing.Normalizer("l2"), linear_model.LogisticRegression(max_iter=500)),
       xi, yi, xi)
    # SVMs.
    sk("sk_svc_rbf_iris", svm.SVC(random_state=0), xi, yi, xi, rtol=1e-4, atol=1e-4)
    sk("sk_svc_rbf_proba_iris", svm.SVC(probability=True, random_state=0), xi, yi, xi, rtol=1e-4, atol=1e-4)
    sk("sk_svc_linear_binary", svm.SVC(kernel="linear", random_state=0), xb, yb, te(xb), rtol=1e-4, atol=1e-4)
    sk("sk_svc_poly_binary_proba", svm.SVC(kernel="poly", degree=3, probability=True, random_state=0), xb, yb, te(xb),
       rtol=1e-4, atol=1e-4)
    sk("sk_linear_svc_iris", svm.LinearSVC(random_state=0), xi, yi, xi, rtol=1e-4, atol=1e-4)
    sk("sk_svr_rbf", svm.SVR(), xr, yr, te(xr), rtol=1e-4, atol=1e-3)
    sk("sk_svr_sigmoid", svm.SVR(kernel="sigmoid", gamma=0.01), xr, yr, te(xr), rtol=1e-4, atol=1e-3)
    sk("sk_linear_svr", svm.LinearSVR(random_state=0), xr, yr, te(xr), rtol=1e-4, atol=1e-3)


sk_cases()


# ---- single nodes built with onnx's helper ----

def ml_node(name, op_type, inputs, outputs, opset=1, rtol=1e-5, atol=1e-6, as_float=False, **attrs):
    """One ai.onnx.ml node (domain opset `opset`) with named outputs; expected from onnxruntime
    (as_float: on the inputs converted to float32, for integer inputs onnxruntime has no kernel
    for: small integers compare with float thresholds the same either way)."""
    node = helper.make_node(op_type, list(inputs), outputs, domain=ML, **attrs)
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(ML, opset)])
    model.ir_version = 8
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    run = model
    if as_float:
        run = helper.make_model(helper.make_graph(
            [node], name, [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in inputs.items()],
            list(graph.output)), opset_imports=model.opset_import)
        run.ir_version = 8
    got = ort.InferenceSession(run.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
        outputs, {k: v.astype(np.float32) for k, v in inputs.items()} if as_float else inputs)
    for o, v in zip(model.graph.output, got):
        o.CopyFrom(helper.make_tensor_value_info(o.name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape))
    c.whole(name, model, inputs, rtol=rtol, atol=atol, expected=dict(zip(outputs, got)))


# Two trees over 3 features: tree 0 splits on f0 then f2, tree 1 on f1 (node ids not in order).
TREES = dict(
    nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1],
    nodes_nodeids=[0, 1, 2, 3, 4, 0, 2, 1],
    nodes_featureids=[0, 2, 0, 0, 0, 1, 0, 0],
    nodes_modes=["BRANCH_LEQ", "BRANCH_LT", "LEAF", "LEAF", "LEAF", "BRANCH_GT", "LEAF", "LEAF"],
    nodes_values=[0.1, -0.3, 0, 0, 0, 0.25, 0, 0],
    nodes_truenodeids=[1, 3, 0, 0, 0, 1, 0, 0],
    nodes_falsenodeids=[2, 4, 0, 0, 0, 2, 0, 0])
LEAVES = [(0, 2), (0, 3), (0, 4), (1, 1), (1, 2)]


def regressor(name, x, targets=1, opset=1, as_tensor=False, **attrs):
    """as_tensor: the thresholds and weights as double tensors (v3's *_as_tensor)."""
    ids, nodes, trees, weights = [], [], [], []
    for k, (t, nd) in enumerate(LEAVES):
        for j in range(targets):
            trees.append(t)
            nodes.append(nd)
            ids.append(j)
            weights.append(round(0.5 * k - 0.75 * j + 0.3, 3))
    attrs = {**TREES, **attrs, "target_weights": weights}
    if as_tensor:
        for a in ["nodes_values", "target_weights"]:
            attrs[a + "_as_tensor"] = numpy_helper.from_array(np.array(attrs.pop(a), np.float64), a)
    ml_node(name, "TreeEnsembleRegressor", {"x": x}, ["y"], opset=opset, n_targets=targets,
            target_ids=ids, target_nodeids=nodes, target_treeids=trees, **attrs)


x3 = rand(40, 3)
for agg in ["SUM", "AVERAGE", "MIN", "MAX"]:
    regressor(f"tree_regressor_{agg.lower()}", x3, aggregate_function=agg)
    regressor(f"tree_regressor_{agg.lower()}_3_targets_base", x3, targets=3, aggregate_function=agg,
              base_values=[0.5, -1.0, 2.0])
regressor("tree_regressor_base_1", x3, base_values=[1.5])
regressor("tree_regressor_probit", rand(20, 3, low=0.05, high=0.4) - 0.2, post_transform="PROBIT",
          aggregate_function="AVERAGE", base_values=[0.5])
for pt in ["LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"]:
    regressor(f"tree_regressor_{pt.lower()}_2_targets", x3, targets=2, post_transform=pt)
regressor("tree_regressor_int64", randint(30, 3, low=-2, high=3), as_float=True, nodes_values=[0.5, -1.0, 0, 0, 0, 0.0, 0, 0])
regressor("tree_regressor_double", rand(30, 3).astype(np.float64))
modes = dict(TREES, nodes_modes=["BRANCH_GTE", "BRANCH_EQ", "LEAF", "LEAF", "LEAF", "BRANCH_NEQ", "LEAF", "LEAF"])
xe = rand(30, 3)
xe[::2, 2] = -0.3
xe[::3, 1] = 0.25
regressor("tree_regressor_modes", xe, **{k: v for k, v in modes.items() if k != "nodes_treeids"},
          nodes_treeids=TREES["nodes_treeids"])
xnan = rand(30, 3)
xnan[::2, 0] = np.nan
xnan[1::3, 1] = np.nan
regressor("tree_regressor_missing_tracks", xnan, nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 1, 0, 0])
regressor("tree_regressor_as_tensor", rand(30, 3).astype(np.float64), opset=3, as_tensor=True,
          base_values_as_tensor=numpy_helper.from_array(np.array([0.125], np.float64), "b"))
# many rows and many trees: the row blocks and the tree split both run
big_trees = {k: [] for k in TREES}
leaves = []
for t in range(40):
    for k, v in TREES.items():
        big_trees[k] += [t if k == "nodes_treeids" else v[i] + 0.01 * t if k == "nodes_values" else v[i]
                         for i in range(5)]
    leaves += [(t, 2), (t, 3), (t, 4)]


def big_regressor(name, x):
    ml_node(name, "TreeEnsembleRegressor", {"x": x}, ["y"], n_targets=1,
            target_ids=[0] * len(leaves), target_nodeids=[n for _, n in leaves],
            target_treeids=[t for t, _ in leaves], target_weights=[0.1 * (i % 7) - 0.2 for i in range(len(leaves))],
            rtol=1e-5, atol=1e-5, **big_trees)


big_regressor("tree_regressor_40_trees_300_rows", rand(300, 3))
big_regressor("tree_regressor_40_trees_1_row", rand(1, 3))


def classifier(name, x, labels, leaf_weights, **attrs):
    """leaf_weights: per leaf of LEAVES, a list of (class id, weight)."""
    ids, nodes, trees, weights = [], [], [], []
    for (t, nd), ws in zip(LEAVES, leaf_weights):
        for j, w in ws:
            trees.append(t)
            nodes.append(nd)
            ids.append(j)
            weights.append(w)
    ml_node(name, "TreeEnsembleClassifier", {"x": x}, ["label", "scores"], class_ids=ids,
            class_nodeids=nodes, class_treeids=trees, class_weights=weights, classlabels_int64s=labels,
            **{**TREES, **attrs})


three = [[(0, 0.6), (1, 0.4)], [(2, 1.0)], [(1, 0.7), (2, 0.3)], [(0, 0.2), (2, 0.5)], [(1, 0.9)]]
classifier("tree_classifier_3", x3, [10, 20, 30], three)
classifier("tree_classifier_3_softmax_base", x3, [10, 20, 30], three, post_transform="SOFTMAX",
           base_values=[0.1, -0.2, 0.3])
classifier("tree_classifier_3_logistic", x3, [10, 20, 30], three, post_transform="LOGISTIC")
classifier("tree_classifier_3_softmax_zero", x3, [10, 20, 30], three, post_transform="SOFTMAX_ZERO")
two = [[(0, 0.6), (1, 0.4)], [(1, 1.0)], [(0, 0.7), (1, 0.3)], [(0, 0.2), (1, 0.5)], [(1, 0.9)]]
classifier("tree_classifier_2_both_classes", x3, [4, 7], two)
one_pos = [[(1, 0.2)], [(1, 0.9)], [(1, 0.3)], [(1, 0.1)], [(1, 0.4)]]
classifier("tree_classifier_binary_positive", x3, [4, 7], one_pos)
one_mixed = [[(1, -0.2)], [(1, 0.9)], [(1, -0.3)], [(1, 0.1)], [(1, -0.4)]]
classifier("tree_classifier_binary_mixed", x3, [4, 7], one_mixed)
classifier("tree_classifier_binary_mixed_logistic", x3, [4, 7], one_mixed, post_transform="LOGISTIC")
classifier("tree_classifier_binary_mixed_base", x3, [4, 7], one_mixed, post_transform="LOGISTIC",
           base_values=[0.25])
classifier("tree_classifier_binary_mixed_base2", x3, [4, 7], one_mixed, base_values=[0.25, 0.25])
only_class_0 = [[(0, -0.2)], [(0, 0.9)], [(0, -0.3)], [(0, 0.1)], [(0, -0.4)]]
classifier("tree_classifier_binary_class_0", x3, [4, 7], only_class_0)
classifier("tree_classifier_binary_class_0_base2_softmax", x3, [4, 7], only_class_0, post_transform="SOFTMAX",
           base_values=[0.1, 0.3])
classifier("tree_classifier_binary_class_0_base1_logistic", x3, [4, 7], only_class_0, post_transform="LOGISTIC",
           base_values=[0.25])
classifier("tree_classifier_2_both_classes_base2", x3, [4, 7], two, base_values=[0.25, 0.25])
classifier("tree_classifier_int32", randint(30, 3, low=-1, high=2, dtype=np.int32), [10, 20, 30], three,
           as_float=True)


# Random forests of ragged trees (leaves at every depth, node ids shuffled), one branch mode each:
# the CPU walks them in the complete-tree layout (backends/cpu/kernels/ml_tree_complete.hpp, 16
# trees per walk; cases_ml_scalar forces its scalar walk) and must agree with the node-by-node walk
# onnxruntime does: modes LEQ, LT, GTE and GT (the last two with the children swapped), missing-value
# tracks on NaN inputs, x read by permute (<= 16 and <= 32 features) or gather, a partial last
# group, dense leaf rows (every leaf one weight per target) and sparse ones, MIN/MAX (leaf by leaf),
# trees too deep or lopsided to lay out whole (their tails walked node by node).
def random_forest(trees, depth, features, mode, targets, dense=True, missing=0.0, stop=0.3):
    """The node and weight attributes of a forest; leaf weights for `targets` targets (all of
    them on every leaf if dense, else one or two)."""
    a = {k: [] for k in ["nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                         "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true"]}
    w = {k: [] for k in ["ids", "nodeids", "treeids", "weights"]}
    for t in range(trees):
        first, wfirst = len(a["nodes_treeids"]), len(w["ids"])

        def grow(level):
            me = len(a["nodes_treeids"]) - first
            leaf = level == depth or (level > 0 and RNG.uniform() < stop)
            row = dict(nodes_treeids=t, nodes_nodeids=me, nodes_featureids=0 if leaf else int(RNG.integers(features)),
                       nodes_modes="LEAF" if leaf else mode,
                       nodes_values=0.0 if leaf else round(float(RNG.normal(0, 0.6)), 3),
                       nodes_missing_value_tracks_true=int(not leaf and RNG.uniform() < missing),
                       nodes_truenodeids=0, nodes_falsenodeids=0)
            at = len(a["nodes_treeids"])
            for k, v in row.items():
                a[k].append(v)
            if leaf:
                for j in (range(targets) if dense else RNG.choice(targets, int(RNG.integers(1, 3)), replace=False)):
                    w["ids"].append(int(j))
                    w["nodeids"].append(me)
                    w["treeids"].append(t)
                    w["weights"].append(round(float(RNG.normal(0, 1)), 3))
            else:
                a["nodes_truenodeids"][at] = grow(level + 1)
                a["nodes_falsenodeids"][at] = grow(level + 1)
            return me

        grow(0)
        # Node ids shuffled (onnxruntime wants them below the tree's node count), the root first.
        perm = np.concatenate([[0], 1 + RNG.permutation(len(a["nodes_treeids"]) - first - 1)])
        for k in ["nodes_nodeids", "nodes_truenodeids", "nodes_falsenodeids"]:
            a[k][first:] = [int(perm[i]) for i in a[k][first:]]
        w["nodeids"][wfirst:] = [int(perm[i]) for i in w["nodeids"][wfirst:]]
    return a, w


def forest_x(rows, features, nan=0.0):
    x = rand(rows, features, low=-1.5, high=1.5)
    x[RNG.uniform(size=x.shape) < nan] = np.nan
    return x


def forest_regressor(name, x, trees, depth, mode, targets=1, dense=True, missing=0.0, stop=0.3, **attrs):
    a, w = random_forest(trees, depth, x.shape[1], mode, targets, dense, missing, stop)
    ml_node(name, "TreeEnsembleRegressor", {"x": x}, ["y"], n_targets=targets, target_ids=w["ids"],
            target_nodeids=w["nodeids"], target_treeids=w["treeids"], target_weights=w["weights"],
            rtol=1e-5, atol=1e-5, **a, **attrs)


def forest_classifier(name, x, trees, depth, mode, classes, dense=True, missing=0.0, stop=0.3, **attrs):
    a, w = random_forest(trees, depth, x.shape[1], mode, classes, dense, missing, stop)
    ml_node(name, "TreeEnsembleClassifier", {"x": x}, ["label", "scores"], class_ids=w["ids"],
            class_nodeids=w["nodeids"], class_treeids=w["treeids"], class_weights=w["weights"],
            classlabels_int64s=list(range(3, 3 + classes)), rtol=1e-5, atol=1e-5, **a, **attrs)


forest_regressor("forest_leq_gather_300_rows", forest_x(300, 40, nan=0.05), 37, 6, "BRANCH_LEQ", missing=0.3)
forest_regressor("forest_leq_gather_1_row", forest_x(1, 40), 37, 6, "BRANCH_LEQ")
forest_regressor("forest_lt_permute2_3_rows", forest_x(3, 20, nan=0.1), 70, 7, "BRANCH_LT", missing=0.5)
forest_regressor("forest_lt_permute2_200_rows", forest_x(200, 20), 70, 7, "BRANCH_LT")
forest_regressor("forest_gte_permute_3_targets_average", forest_x(90, 12, nan=0.1), 33, 5, "BRANCH_GTE",
                 targets=3, missing=0.5, aggregate_function="AVERAGE", base_values=[0.5, -1.0, 2.0])
forest_regressor("forest_gt_permute_1_row", forest_x(1, 12, nan=0.2), 33, 5, "BRANCH_GT", missing=0.5)
forest_regressor("forest_gt_sparse_2_targets", forest_x(60, 9, nan=0.05), 20, 4, "BRANCH_GT", targets=2,
                 dense=False, missing=0.3)
forest_regressor("forest_leq_min_2_targets", forest_x(60, 9), 20, 4, "BRANCH_LEQ", targets=2, aggregate_function="MIN")
forest_regressor("forest_lt_max", forest_x(60, 9), 20, 4, "BRANCH_LT", aggregate_function="MAX")
forest_regressor("forest_leq_depth_13", forest_x(40, 6), 3, 13, "BRANCH_LEQ", stop=0.05)
# Lopsided trees (as LightGBM grows them): the top levels laid out, the tails walked node by node.
forest_regressor("forest_lt_lopsided_tails_2_targets", forest_x(150, 10, nan=0.05), 40, 16, "BRANCH_LT",
                 targets=2, missing=0.3, stop=0.45)
forest_classifier("forest_classifier_gt_lopsided_sparse", forest_x(100, 24, nan=0.05), 48, 18, "BRANCH_GT", 3,
                  dense=False, missing=0.3, stop=0.45)
forest_classifier("forest_classifier_leq_4_classes", forest_x(120, 16, nan=0.05), 50, 6, "BRANCH_LEQ", 4,
                  missing=0.3, post_transform="SOFTMAX")
forest_classifier("forest_classifier_gte_sparse", forest_x(80, 30), 41, 5, "BRANCH_GTE", 3, dense=False)
forest_classifier("forest_classifier_lt_binary_1_row", forest_x(1, 8), 17, 5, "BRANCH_LT", 2)

# ---- linear models, SVM and preprocessing nodes ----
x4 = rand(12, 4)
coef3 = [0.5, -0.2, 0.1, 0.3, -0.4, 0.8, 0.05, -0.1, 0.2, 0.2, -0.6, 0.9]
ml_node("linear_regressor", "LinearRegressor", {"x": x4}, ["y"], coefficients=coef3[:4], intercepts=[0.5])
ml_node("linear_regressor_3_targets_softmax", "LinearRegressor", {"x": x4}, ["y"], coefficients=coef3,
        intercepts=[0.1, 0.2, -0.3], targets=3, post_transform="SOFTMAX")
ml_node("linear_regressor_int64", "LinearRegressor", {"x": randint(5, 4)}, ["y"], coefficients=coef3[:4],
        as_float=True)
for pt in ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"]:
    ml_node(f"linear_classifier_3_{pt.lower()}", "LinearClassifier", {"x": x4}, ["label", "scores"],
            coefficients=coef3, intercepts=[0.1, 0.2, -0.3], classlabels_ints=[1, 5, 9], post_transform=pt)
ml_node("linear_classifier_binary_one_row", "LinearClassifier", {"x": x4}, ["label", "scores"],
        coefficients=coef3[:4], intercepts=[0.05], classlabels_ints=[3, 8])
ml_node("linear_classifier_1d_double", "LinearClassifier", {"x": rand(4).astype(np.float64)},
        ["label", "scores"], coefficients=coef3, intercepts=[0.1, 0.2, -0.3], classlabels_ints=[1, 5, 9])
ml_node("svm_regressor_linear", "SVMRegressor", {"x": x4}, ["y"], coefficients=coef3[:4], rho=[0.2],
        kernel_type="LINEAR", kernel_params=[0.0, 0.0, 0.0])
ml_node("svm_regressor_poly_one_class", "SVMRegressor", {"x": x4}, ["y"], coefficients=[0.5, -0.3, 0.8],
        support_vectors=coef3, n_supports=3, rho=[0.1], kernel_type="POLY", kernel_params=[0.5, 0.2, 2.0],
        one_class=1)
ml_node("svm_classifier_linear_mode", "SVMClassifier", {"x": x4}, ["label", "scores"], coefficients=coef3,
        rho=[0.1], classlabels_ints=[0, 1, 2], post_transform="SOFTMAX", kernel_params=[0.0, 0.0, 0.0])
ml_node("scaler_per_feature", "Scaler", {"x": x4}, ["y"], scale=[2.0, 0.5, -1.0, 3.0], offset=[0.1, 0.2, 0.3, 0.4])
ml_node("scaler_scalar_int64", "Scaler", {"x": randint(3, 4)}, ["y"], scale=[0.5], offset=[1.0])
for norm in ["MAX", "L1", "L2"]:
    xz = rand(6, 4)
    xz[2] = 0
    ml_node(f"normalizer_{norm.lower()}", "Normalizer", {"x": xz}, ["y"], norm=norm)
ml_node("normalizer_l2_1d", "Normalizer", {"x": rand(5)}, ["y"], norm="L2")
ml_node("one_hot_encoder", "OneHotEncoder", {"x": np.array([[3, 1], [7, 3], [5, 1]], np.int64)}, ["y"],
        cats_int64s=[1, 3, 5, 9])
ml_node("one_hot_encoder_float", "OneHotEncoder", {"x": np.array([1.0, 3.7, 9.0], np.float32)}, ["y"],
        cats_int64s=[1, 3, 9])
xi = rand(4, 3)
xi[0, 1] = np.nan
xi[2, 0] = np.nan
ml_node("imputer_nan_per_feature", "Imputer", {"x": xi}, ["y"], imputed_value_floats=[1.0, 2.0, 3.0],
        replaced_value_float=float("nan"))
ml_node("imputer_int64", "Imputer", {"x": np.array([[0, 4], [5, 0]], np.int64)}, ["y"],
        imputed_value_int64s=[-7], replaced_value_int64=0)
ml_node("label_encoder_int_int", "LabelEncoder", {"x": np.array([[1, 5], [9, 4]], np.int64)}, ["y"], opset=2,
        keys_int64s=[1, 4, 9], values_int64s=[10, 40, 90], default_int64=-5)
ml_node("label_encoder_float_int", "LabelEncoder", {"x": np.array([0.5, 1.5, -2.0], np.float32)}, ["y"], opset=2,
        keys_floats=[0.5, -2.0], values_int64s=[1, 2])
ml_node("label_encoder_int_float", "LabelEncoder", {"x": np.array([3, 4, 8], np.int64)}, ["y"], opset=2,
        keys_int64s=[3, 8], values_floats=[0.25, -1.5], default_float=9.0)
# Float keys and values at float32's extremes (fuzz_model: their cast to int64 was undefined).
ml_node("label_encoder_extreme_floats", "LabelEncoder", {"x": np.array([3.4e38, -1.0, 0.5], np.float32)},
        ["y"], opset=2, keys_floats=[3.4e38, -1.0], values_floats=[-3.4e38, 3.4e38], default_float=1e30)
ml_node("label_encoder_tensor_double", "LabelEncoder", {"x": np.array([1.0, 2.0, 7.0], np.float64)}, ["y"],
        opset=4, keys_tensor=numpy_helper.from_array(np.array([1.0, 7.0]), "k"),
        values_tensor=numpy_helper.from_array(np.array([11, 77], np.int64), "v"),
        default_tensor=numpy_helper.from_array(np.array([-3], np.int64), "d"))
ml_node("feature_vectorizer", "FeatureVectorizer",
        {"a": rand(3, 2), "b": rand(3, 4), "c": rand(3, 1)}, ["y"], inputdimensions=[2, 3, 2])
ml_node("feature_vectorizer_int64", "FeatureVectorizer", {"a": randint(2, 3), "b": randint(2, 1)}, ["y"],
        inputdimensions=[3, 1])
