"""The statistical core shared by the summary (analysis) and the race: formulas (stats: intervals, tests,
corrections, power), arms and their comparison (arms: which run-to-run SD an arm uses, the published
anchor), and how fragile a verdict is (sensitivity). It imports neither analysis nor race."""
