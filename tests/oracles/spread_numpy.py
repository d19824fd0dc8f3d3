"""Oracle for measurement::Spread: numpy's quantiles (linear interpolation, its default) and the
median absolute deviation of the values given.

    spread_numpy.py 3.0 1.0 2.0 ...   -> {"median", "min", "max", "q1", "q3", "iqr", "mad", "n"}
"""
import json
import sys

import numpy as np

v = np.array([float(x) for x in sys.argv[1:]])
q1, med, q3 = np.percentile(v, [25, 50, 75])
print(json.dumps({"median": med, "min": v.min(), "max": v.max(), "q1": q1, "q3": q3, "iqr": q3 - q1,
                  "mad": float(np.median(np.abs(v - med))), "n": len(v)}))
