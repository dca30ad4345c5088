//! Parquet telemetry writers (being written).
