"""Evaluator: sample n completions per problem, grade the last boxed answer, keep every sample."""
