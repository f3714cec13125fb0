package main

import (
	"context"
	"io"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// providers export to out and, when OTEL_EXPORTER_OTLP_ENDPOINT is set,
// over OTLP/HTTP too (the exporters read it and the other OTEL_EXPORTER_OTLP_*).
func providers(ctx context.Context, out io.Writer) (*sdktrace.TracerProvider, *sdkmetric.MeterProvider, error) {
	spans, err := stdouttrace.New(stdouttrace.WithWriter(out), stdouttrace.WithPrettyPrint())
	if err != nil {
		return nil, nil, err
	}
	metrics, err := stdoutmetric.New(stdoutmetric.WithWriter(out), stdoutmetric.WithPrettyPrint())
	if err != nil {
		return nil, nil, err
	}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithSyncer(spans)}
	mopts := []sdkmetric.Option{sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics))}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" {
		otlpSpans, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, nil, err
		}
		otlpMetrics, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, nil, err
		}
		topts = append(topts, sdktrace.WithBatcher(otlpSpans))
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(otlpMetrics)))
	}
	return sdktrace.NewTracerProvider(topts...), sdkmetric.NewMeterProvider(mopts...), nil
}
