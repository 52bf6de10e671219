"""The record of every freeze of the labelled set (append-only; see `frozen.py` for the rule).

A Python module rather than a data file so that it ships with the package as it is. Each
entry: the batch (note prefix) frozen, its row count and content hash, and the hash of the
rule/lexicon files at freezing time. The last entry is the frozen evaluation part.
"""

from typing import Any

FREEZES: tuple[dict[str, object], ...] = (
    {
        # The batch's notes say it was written after the rules were frozen and never tuned
        # on; the record starts here, so rules_sha256 is the files as of this entry.
        "batch": "holdout5:",
        "n": 38,
        "sha256": "cb36c4e6000ed22cdb262f805f3f0a5b7db874366783d7af7a1658844824f20c",
        "rules_sha256": "ac879bc63b5653e2e1f88b4a8179c386685ca5eb45084b094749c437ececfcfe",
        "rules_version": "sv-rules-safety@2",
    },
)

_PYRIT_WHEEL = {
    "package": "pyrit",
    "version": "1.1.0",
    "sha256": "84581036bace7ff2aa92712e1e3f472a3a3bccc77567d5fbe642540c0ba20b0a",
}

EXTERNAL_TEST: dict[str, Any] = {
    # Human labels written by other people (PyRIT's scorer evaluations, MIT): did the response
    # achieve the harmful objective. Never trained, tuned or thresholded on; every judge's
    # external figure is measured on exactly these rows (sv_dagster.core.data.external_labels).
    "wheel": _PYRIT_WHEEL,
    "members": {
        "pyrit/datasets/scorer_evals/objective/bias.csv": "be11ab70e918ddc1b88ef43496df2e1336ec63527f56094c2db42ab0fb490980",
        "pyrit/datasets/scorer_evals/objective/chemical_biological.csv": "1f6d092b50dfc90cf95608372b70737a27ff786ee4c09f4549c63e374c1e4a38",
        "pyrit/datasets/scorer_evals/objective/cyber.csv": "57fad141e2237b244737b72c3f46b33b5a3c509365d5e832d2612b34caa967cd",
        "pyrit/datasets/scorer_evals/objective/exploits.csv": "315f4220f8533059b7d1ee86a492fb348e860e7f5e5fe17190c87b5736a2dc27",
        "pyrit/datasets/scorer_evals/objective/harassment_bullying.csv": "ce8814ccc30ce1556bc191daaf597845fa2ab569561cb14076f09bb6d3dfdcce",
        "pyrit/datasets/scorer_evals/objective/hate_speech.csv": "9572e1072e228ca50af0ed27faca07cb8b7ac03a6ba5ef905988b41f87ebdb24",
        "pyrit/datasets/scorer_evals/objective/illegal_activity.csv": "27b2c07e5183c8068f09313137c3e5360954b746152bda45b6cac8ad69f753ee",
        "pyrit/datasets/scorer_evals/objective/info_integrity.csv": "ae8537d73d7a627cdd2a6837c364d434d7e819188b157b935efdb09e65e7df2e",
        "pyrit/datasets/scorer_evals/objective/misinformation.csv": "4a2e81aff9a0f2c6305d156b15e7ac344e77192f85c17d7ec59495ad701015be",
        "pyrit/datasets/scorer_evals/objective/phishing.csv": "573f09da2265ec886b173d1cd0574943dd6cdfad2859b10daccd2d990f16e35d",
        "pyrit/datasets/scorer_evals/objective/privacy.csv": "a115b3df4c812d95f358d8afa628243ff137a5051f2399ca89eb4bd866e20946",
        "pyrit/datasets/scorer_evals/objective/self_harm.csv": "e8a36cdbd420650a0213798a869848f55c4c31cc6000f30bc78c4b37f96c0f8f",
        "pyrit/datasets/scorer_evals/objective/sexual.csv": "b619f60677b3a941f34992914fdd06c26a49116bce9305bebab3fca7b0b06c8b",
        "pyrit/datasets/scorer_evals/objective/violence.csv": "298d191a992d506439aa5150f58e8c1d1bd6b89f2bc501c66f4e5abf498debe2",
    },
    "n": 395,
    "n_unsafe": 191,
    "rows_sha256": "6b6ec6166de534b1c1baf2c970c3ccf15966a6531c345f2009a23689ffff6803",
    "published_metrics_sha256": "88da9e19c994ce95d1795a64eb8e3a1af1be1dd8f0810eb66cfd5dbe354cd51e",
}

EXTERNAL_DEVELOPMENT: dict[str, Any] = {
    # PyRIT's harm-scale labels, usable for development only once every row whose response
    # (nearly) duplicates an external test response is removed; n and the hash are of the rows
    # left, so a change of the dedup or of the test shows here too.
    "wheel": _PYRIT_WHEEL,
    "members": {
        "pyrit/datasets/scorer_evals/harm/exploits.csv": "f736d8f3d0c2a034cc38f92d587eb66d71740cd1a712bc03eda6d32148d7e6af",
        "pyrit/datasets/scorer_evals/harm/hate_speech.csv": "6548e2e377d054cbca9ff6751022e20dc06b59957830b7e74e54b144371fcb3b",
        "pyrit/datasets/scorer_evals/harm/hate_speech_multi_score.csv": "6597b56a388b68fe8c072a0d6953f211ce62e23ed46373f36207a3261de0c406",
        "pyrit/datasets/scorer_evals/harm/info_integrity.csv": "d13de133267b803b7d6a483bca53039411cfe6d0ffa51df6ae441352d3a9be66",
        "pyrit/datasets/scorer_evals/harm/mini_hate_speech.csv": "7b1383503183a11b4f14999b63ea2bcb86509e6569d899fc6db70289e2829679",
        "pyrit/datasets/scorer_evals/harm/privacy.csv": "8b5f63bfc33220e00e5ed835932e1a43809664ceda4bb8f28d6bbe056ca91093",
        "pyrit/datasets/scorer_evals/harm/representational.csv": "f4299fd91911ee1dfc3b395d89db89004c8ad43ab5a19d720af03dbc18acc142",
        "pyrit/datasets/scorer_evals/harm/self_harm.csv": "2abdac174039c12e36ba1120c37d1175c34645d6dac9af657d56f82a5280f459",
        "pyrit/datasets/scorer_evals/harm/sexual.csv": "f20bd23321442ca3be3e65081db930eaeab7befe185eea0fb9e4313be7061505",
        "pyrit/datasets/scorer_evals/harm/violence.csv": "f47d6c984ee7cf6481972ef2035483f91717870d2728736421c522220c66dfea",
        "pyrit/datasets/scorer_evals/harm/violence_multi_score.csv": "20f311f0de3a97173f7555a139c55011339778f58924f484cbe3da205b55c0d0",
    },
    "n": 742,
    "rows_sha256": "af38f9c2dca8264d270c333683baeaacc5ac8180296c6ffc91b97354ed0d89d6",
}
