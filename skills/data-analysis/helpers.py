"""pandas helpers: cleaning and compact summaries."""
import pandas as pd


def clean(df):
    """Return a cleaned copy: tidy column names, stripped text, numbers
    parsed, empty and duplicate rows dropped."""
    df = df.copy()
    df.columns = [str(c).strip().lower().replace(" ", "_") for c in df.columns]
    for col in df.columns:
        if df[col].dtype == object:
            df[col] = df[col].map(lambda v: v.strip() if isinstance(v, str) else v)
            numeric = pd.to_numeric(df[col], errors="coerce")
            if numeric.notna().sum() == df[col].notna().sum() and df[col].notna().any():
                df[col] = numeric
    df = df.dropna(how="all").drop_duplicates().reset_index(drop=True)
    return df


def summary(df, max_values=5):
    """A few lines describing each column: type, missing values, and range
    or most common values."""
    lines = [f"{len(df)} rows x {len(df.columns)} columns"]
    for col in df.columns:
        s = df[col]
        missing = int(s.isna().sum())
        if pd.api.types.is_numeric_dtype(s):
            desc = f"min {s.min():g}, mean {s.mean():.4g}, max {s.max():g}"
        else:
            top = s.value_counts().head(max_values)
            desc = ", ".join(f"{k} ({v})" for k, v in top.items())
        lines.append(f"- {col} [{s.dtype}], {missing} missing: {desc}")
    return "\n".join(lines)
