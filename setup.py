"""bert-tf2: Google's original BERT scripts, ported faithfully to TensorFlow 2."""
from setuptools import find_packages, setup

# The repository root: the reference's modules and scripts (their names are what its users
# import), our two other runners and the command faces. Everything else is in bert_tf2/, and
# bert/ gives the same modules under `from bert import ...` (bert-tensorflow's import style).
MODULES = [
    "modeling", "tokenization", "optimization", "create_pretraining_data", "run_pretraining",
    "run_classifier", "run_squad", "extract_features", "run_ner", "run_multiple_choice",
    "convert_tf1_checkpoint", "convert_hf_checkpoint", "convert_keras_hub", "export_saved_model",
    "create_vocab", "run_ranker",
]

SCRIPTS = {
    "bert-create-pretraining-data": "create_pretraining_data",
    "bert-run-pretraining": "run_pretraining",
    "bert-run-classifier": "run_classifier",
    "bert-run-squad": "run_squad",
    "bert-run-ner": "run_ner",
    "bert-run-multiple-choice": "run_multiple_choice",
    "bert-extract-features": "extract_features",
    "bert-convert-tf1-checkpoint": "convert_tf1_checkpoint",
    "bert-convert-hf-checkpoint": "convert_hf_checkpoint",
    "bert-convert-keras-hub": "convert_keras_hub",
    "bert-export-saved-model": "export_saved_model",
    "bert-create-vocab": "create_vocab",
    "bert-run-ranker": "run_ranker",
}

setup(
    name="bert-tf2",
    version="0.1.0",
    description="Google's original BERT (run_pretraining, run_classifier, run_squad, ...) on TF 2.20",
    license="Apache-2.0",
    python_requires=">=3.10,<3.14",
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Intended Audience :: Science/Research",
    ],
    py_modules=MODULES,
    packages=find_packages(include=["bert_tf2", "bert_tf2.*", "bert"]),
    install_requires=[
        "tensorflow~=2.20.0",
        "tensorflow-text~=2.20.0",
        "tf-models-official~=2.20.0",
        "tf-keras~=2.20.0",
        "absl-py>=1.0",
        "numpy>=1.26",
        # Imported directly (STS-B's correlations; the trainer's summaries): declared here rather
        # than left to come through tf-models-official and TensorFlow (TF 2.21 no longer brings
        # TensorBoard along).
        "scipy>=1.10",
        "tensorboard>=2.20",
        # TensorFlow 2.20 asks only protobuf>=5.28, but its graph.pbtxt writer (every Estimator
        # train()) passes float_format=, which protobuf 7 removed: a plain install would get 7.x.
        "protobuf>=5.28,<7",
    ],
    extras_require={
        "test": ["pytest>=8", "pytest-xdist>=3"],
        "bench": ["tokenizers>=0.19"],
        "hf": ["safetensors>=0.4"],
        # convert_keras_hub.py (keras-hub presets both ways); imported only by that face.
        # keras-hub 0.32.0 resolves with tensorflow 2.20 and the keras 3 TensorFlow brings;
        # it needs Python 3.11+ (on 3.10 the extra installs nothing and the face says so).
        "keras-hub": ['keras-hub==0.32.0; python_version >= "3.11"'],
        # Resolves with tensorflow 2.20 / tf-models-official 2.20 (checked with pip check):
        # apache-beam 2.77.0 with protobuf 6.33.6 (Beam needs < 7), pyarrow 25.0.1
        # (Beam needs < 26), numpy 2.4 (Beam needs < 2.5).
        "beam": ["apache-beam>=2.77,<3", "protobuf>=5.28,<7", "pyarrow>=14,<26"],
        # create_pretraining_data --chinese_word_segmenter=jieba (pure Python).
        "chinese": ["jieba>=0.42"],
        # export_saved_model.py --litert and bert_tf2.export.litert_predictor: LiteRT's
        # interpreter (conversion is TensorFlow's own tf.lite.TFLiteConverter).
        "litert": ["ai-edge-litert>=2.0"],
        # export_saved_model.py --openvino (conversion, NNCF's int8) and
        # bert_tf2.export.openvino_predictor; the versions checked with tensorflow 2.20.
        "openvino": ["openvino>=2026.4.1,<2027", "nncf>=3.4.0,<4"],
        # export_saved_model.py --onnx (tf2onnx, onnx; ONNX Runtime's quantizer) and
        # bert_tf2.export.onnx_predictor (onnxruntime); tf2onnx 1.17 converts TF 2.20's graphs.
        "onnx": ["onnxruntime>=1.32.0,<2", "onnx>=1.23.2,<2", "tf2onnx>=1.17.0,<2"],
        # The documentation site (mkdocs.yml, `make docs`): MkDocs' own theme, and
        # pymdown-extensions for its snippets (the benchmarks page includes
        # benchmarks/README.md instead of a copy).
        "docs": ["mkdocs>=1.6,<2", "pymdown-extensions>=10.0,<11"],
    },
    entry_points={
        "console_scripts": ["%s=%s:main" % (cmd, mod) for cmd, mod in SCRIPTS.items()],
    },
)
