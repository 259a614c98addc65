from __future__ import annotations

from django.apps import AppConfig


class PreviewsConfig(AppConfig):
    """What-if, forecast and fit check: the engine run on a copy of the snapshot (no models; the
    stored forecast is kai_portal/history's JobForecast)."""

    name = "kai_portal.previews"
    verbose_name = "Previews"

    def ready(self) -> None:
        from kai_portal.previews import forecast_store
        from kai_portal.scheduling.signals import cycle_finished

        # The forecast refresh after each cycle; dispatch_uid keeps it to one connection.
        cycle_finished.connect(forecast_store.on_cycle_finished, dispatch_uid="previews.forecast_refresh")
