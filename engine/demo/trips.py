"""The demo's trips dataset: every batch of the walkthrough as plain rows (pure, deterministic).

No randomness and no clock: trip `i` always has the same city, rider, driver, fare, distance and
event time, so the demo prints the same numbers on every run and its test can assert them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# 2026-01-01T00:00:00Z: event times (`ts`, the precombine field) count seconds from here
T0 = 1_767_225_600
CITIES = ("paris", "rome", "oslo")
NEW_CITY = "lisbon"  # the upsert batch opens a partition the load did not have

SCHEMA = "trip_id string, city string, rider string, driver string, fare double, distance_km double, ts long"
KEY_SCHEMA = "trip_id string, city string"

LOAD_SIZE = 120
UPDATED = range(0, 15)  # trips whose fare gets a tip in the upsert batch
INSERTED = range(LOAD_SIZE, LOAD_SIZE + 6)  # new trips in the upsert batch (all in NEW_CITY)
DELETED = range(15, 20)  # cancelled trips
BAD = range(20, 50)  # the bad batch: fares in the wrong unit (negative)
TIP = 2.5


@dataclass(frozen=True)
class Trip:
    trip_id: str
    city: str
    rider: str
    driver: str
    fare: float
    distance_km: float
    ts: int

    def row(self) -> tuple[str, str, str, str, float, float, int]:
        """The trip as a row of SCHEMA."""
        return (self.trip_id, self.city, self.rider, self.driver, self.fare, self.distance_km, self.ts)

    def key(self) -> tuple[str, str]:
        """(trip_id, city): what a delete needs (record key and partition field)."""
        return (self.trip_id, self.city)


def trip_id(i: int) -> str:
    return f"trip-{i:04d}"


def trip(i: int, city: str | None = None) -> Trip:
    """Trip number `i` as first recorded."""
    return Trip(
        trip_id=trip_id(i),
        city=city or CITIES[i % len(CITIES)],
        rider=f"rider-{i * 7 % 40:03d}",
        driver=f"driver-{i * 11 % 25:03d}",
        fare=round(5.0 + (i * 37 % 700) / 10, 2),
        distance_km=round(1.0 + (i * 13 % 290) / 10, 1),
        ts=T0 + i * 60,
    )


def load_batch() -> list[Trip]:
    """The initial load: LOAD_SIZE trips spread evenly over CITIES."""
    return [trip(i) for i in range(LOAD_SIZE)]


def upsert_batch() -> list[Trip]:
    """Tips added to the UPDATED trips (a later event time), plus the INSERTED trips in NEW_CITY."""
    updates = [replace(trip(i), fare=round(trip(i).fare + TIP, 2), ts=trip(i).ts + 3600) for i in UPDATED]
    return updates + [trip(i, NEW_CITY) for i in INSERTED]


def delete_keys() -> list[tuple[str, str]]:
    """The cancelled trips, as (trip_id, city)."""
    return [trip(i).key() for i in DELETED]


def bad_batch() -> list[Trip]:
    """A batch from a broken upstream job: the BAD trips with negative fares (and a later event
    time, so they win over the stored versions)."""
    return [replace(trip(i), fare=-trip(i).fare, ts=trip(i).ts + 7200) for i in BAD]


def expected_after_deletes() -> dict[str, Trip]:
    """trip_id -> trip of the table after load, upsert and delete (what the rollback returns to)."""
    table = {t.trip_id: t for t in load_batch()}
    table.update({t.trip_id: t for t in upsert_batch()})
    for i in DELETED:
        del table[trip_id(i)]
    return table
