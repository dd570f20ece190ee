"""SymPy helpers that take expressions as strings."""
import sympy
from sympy.parsing.sympy_parser import parse_expr, standard_transformations, implicit_multiplication_application

_TRANSFORMS = standard_transformations + (implicit_multiplication_application,)


def parse(expr):
    """Parse a Python-syntax expression string into a SymPy expression."""
    return parse_expr(expr, transformations=_TRANSFORMS)


def solve(equation, var="x"):
    """Solve 'lhs = rhs' (or 'expr', meaning expr = 0) for var."""
    symbol = sympy.Symbol(var)
    if "=" in equation:
        lhs, rhs = equation.split("=", 1)
        expr = parse(lhs) - parse(rhs)
    else:
        expr = parse(equation)
    return sympy.solve(expr, symbol)


def simplify(expr):
    """Simplify an expression."""
    return sympy.simplify(parse(expr))


def diff(expr, var="x", n=1):
    """The n-th derivative of expr with respect to var."""
    return sympy.diff(parse(expr), sympy.Symbol(var), n)


def integrate(expr, var="x", lower=None, upper=None):
    """The indefinite integral, or the definite one between lower and upper."""
    symbol = sympy.Symbol(var)
    if lower is None and upper is None:
        return sympy.integrate(parse(expr), symbol)
    return sympy.integrate(parse(expr), (symbol, lower, upper))
