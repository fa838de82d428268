"""An in-memory HBase Thrift1 server on 127.0.0.1 for TESTS ONLY (never shipped in `engine/`).

It speaks the `Hbase.thrift` protocol that happybase ships (served with thriftpy2), so
happybase reaches it exactly as it reaches a real HBase Thrift server
(`hbase thrift start`, buffered transport + binary protocol by default).

Semantics mirrored from HBase 2.x's `ThriftHBaseServiceHandler`:
- rows sorted by row-key bytes; cells keyed by `family:qualifier`, columns of a row returned
  in (family, qualifier) order; a column spec without `:` means the whole family;
- versions carry timestamps (default: now in ms); a family keeps at most `maxVersions`
  (descriptor default 3) newest versions; reads return the newest one unless `getVer*`;
- the `*Ts` reads and `TScan.timestamp` use HBase's time range `[0, ts)` (exclusive);
- deletes leave a delete marker: every version with timestamp <= the marker's is gone, and a
  later put with such an older timestamp stays invisible (until `majorCompact`);
- `mutateRow(Ts)` applies the row's deletes before its puts, `mutateRows(Ts)` all puts before
  all deletes (as HBase does), so a put and a delete of one cell in one batch leave nothing;
- unknown tables, unknown families, disabled tables → `IOError`; creating an existing table
  → `AlreadyExists`; bad names / no families → `IllegalArgument`;
- filter strings are not interpreted: anything but an empty filter → `IOError`.
Not modelled: TTL, regions beyond one, `checkAndPut`/`append` (IOError "not supported").
"""

from __future__ import annotations

import functools
import os
import re
import socket
import struct
import threading
import time
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import happybase
import thriftpy2
from thriftpy2.protocol import TBinaryProtocolFactory, TCompactProtocolFactory
from thriftpy2.rpc import make_server
from thriftpy2.transport import TBufferedTransportFactory, TFramedTransportFactory, TTransportException

HBASE_THRIFT = thriftpy2.load(
    os.path.join(os.path.dirname(happybase.__file__), "Hbase.thrift"), module_name="hbase_stand_in_thrift"
)
T = HBASE_THRIFT

_TABLE_NAME = re.compile(rb"^(?:[A-Za-z0-9_]+:)?[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_LONG = struct.Struct(">q")
_MAX_TS = 2**63 - 1  # HConstants.LATEST_TIMESTAMP


def _now_ms() -> int:
    return int(time.time() * 1000)


def _parse_column(column: bytes) -> tuple[bytes, bytes | None]:
    """HBase's CellUtil.parseColumn: `fam` → (fam, None) (whole family), `fam:` → (fam, b'')."""
    family, sep, qualifier = column.partition(b":")
    return (family, qualifier) if sep else (family, None)


Versions = list[tuple[int, bytes]]  # (timestamp, value), newest first


@dataclass
class _Table:
    name: bytes
    families: dict[bytes, Any]  # family name (no colon) → ColumnDescriptor
    enabled: bool = True
    keys: list[bytes] = field(default_factory=list)  # sorted row keys with at least one cell
    rows: dict[bytes, dict[tuple[bytes, bytes], Versions]] = field(default_factory=dict)
    # row → {(family, qualifier or None for the whole family): newest delete-marker timestamp}
    markers: dict[bytes, dict[tuple[bytes, bytes | None], int]] = field(default_factory=dict)
    region_id: int = field(default_factory=_now_ms)

    def check_family(self, family: bytes) -> None:
        if family not in self.families:
            raise T.IOError(
                message=f"org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException: "
                f"Column family {family.decode(errors='replace')} does not exist in region "
                f"{self.name.decode(errors='replace')}"
            )

    def max_versions(self, family: bytes) -> int:
        return max(1, int(self.families[family].maxVersions or 1))

    # -- writes ------------------------------------------------------------------------------

    def put(self, row: bytes, family: bytes, qualifier: bytes, ts: int, value: bytes) -> None:
        self.check_family(family)
        marks = self.markers.get(row, {})
        if marks.get((family, None), -1) >= ts or marks.get((family, qualifier), -1) >= ts:
            return  # masked by a delete marker, as in HBase
        cells = self.rows.get(row)
        if cells is None:
            cells = self.rows[row] = {}
            insort(self.keys, row)
        versions = [(t, v) for t, v in cells.get((family, qualifier), []) if t != ts]
        versions.append((ts, value))
        versions.sort(key=lambda tv: -tv[0])
        cells[(family, qualifier)] = versions[: self.max_versions(family)]

    def delete(self, row: bytes, family: bytes, qualifier: bytes | None, ts: int) -> None:
        """Delete every version <= ts of one column (or of the whole family when qualifier is None)."""
        self.check_family(family)
        marks = self.markers.setdefault(row, {})
        marks[(family, qualifier)] = max(ts, marks.get((family, qualifier), -1))
        cells = self.rows.get(row)
        if not cells:
            return
        for fam, qual in list(cells):
            if fam == family and (qualifier is None or qual == qualifier):
                kept = [(t, v) for t, v in cells[(fam, qual)] if t > ts]
                if kept:
                    cells[(fam, qual)] = kept
                else:
                    del cells[(fam, qual)]
        if not cells:
            del self.rows[row]
            del self.keys[bisect_left(self.keys, row)]

    def delete_row(self, row: bytes, ts: int) -> None:
        for family in self.families:
            self.delete(row, family, None, ts)

    # -- reads -------------------------------------------------------------------------------

    def read(
        self, row: bytes, columns: list[bytes] | None, before: int = _MAX_TS, versions: int = 1
    ) -> list[tuple[bytes, bytes, Versions]]:
        """The row's cells matching `columns` with timestamps < `before`, in (family, qualifier) order."""
        wanted: list[tuple[bytes, bytes | None]] = []
        for column in columns or []:
            family, qualifier = _parse_column(column)
            self.check_family(family)
            wanted.append((family, qualifier))
        out = []
        for (family, qualifier), cells in sorted(self.rows.get(row, {}).items()):
            if wanted and not any(f == family and (q is None or q == qualifier) for f, q in wanted):
                continue
            kept = [(t, v) for t, v in cells if t < before][:versions]
            if kept:
                out.append((family, qualifier, kept))
        return out

    def row_result(
        self, row: bytes, columns: list[bytes] | None, before: int = _MAX_TS, sort_columns: bool = False
    ) -> Any | None:
        cells = self.read(row, columns, before)
        if not cells:
            return None
        return _row_result(row, cells, sort_columns)


def _row_result(row: bytes, cells: list[tuple[bytes, bytes, Versions]], sort_columns: bool) -> Any:
    if sort_columns:
        return T.TRowResult(
            row=row,
            sortedColumns=[
                T.TColumn(columnName=f + b":" + q, cell=T.TCell(value=vs[0][1], timestamp=vs[0][0]))
                for f, q, vs in cells
            ],
        )
    return T.TRowResult(
        row=row, columns={f + b":" + q: T.TCell(value=vs[0][1], timestamp=vs[0][0]) for f, q, vs in cells}
    )


@dataclass
class _Scanner:
    table: bytes
    start: bytes
    stop: bytes | None  # None or b"": to the end of the table
    prefix: bytes | None
    columns: list[bytes] | None
    before: int
    batch: int | None  # Scan.setBatch: at most this many cells per returned result
    sort_columns: bool
    reverse: bool
    cursor: bytes | None = None  # the last row read
    pending: list[Any] = field(default_factory=list)  # partial results of the last row


def _api(method: Callable) -> Callable:
    """Run a handler method under the server lock; turn unexpected errors into IOError."""

    @functools.wraps(method)
    def run(self: HBaseHandler, *args: Any) -> Any:
        with self.lock:
            try:
                return method(self, *args)
            except (T.IOError, T.IllegalArgument, T.AlreadyExists):
                raise
            except Exception as e:  # noqa: BLE001 - a real server answers IOError, never drops the link
                raise T.IOError(message=f"{type(e).__name__}: {e}") from e

    return run


class HBaseHandler:
    """The Thrift1 `Hbase` service over in-memory tables (one lock serialises every call)."""

    def __init__(self, port: int = 0) -> None:
        self.lock = threading.RLock()
        self.tables: dict[bytes, _Table] = {}
        self.scanners: dict[int, _Scanner] = {}
        self.next_scanner = 1
        self.port = port

    # -- helpers -----------------------------------------------------------------------------

    def _table(self, name: bytes, enabled: bool = True) -> _Table:
        table = self.tables.get(name)
        if table is None:
            raise T.IOError(message=f"org.apache.hadoop.hbase.TableNotFoundException: {name.decode(errors='replace')}")
        if enabled and not table.enabled:
            raise T.IOError(message=f"org.apache.hadoop.hbase.TableNotEnabledException: {name.decode(errors='replace')}")
        return table

    def _mutate(self, table: _Table, row: bytes, mutations: list[Any], ts: int | None, deletes_first: bool) -> None:
        def deletes() -> None:
            for m in mutations:
                if m.isDelete:
                    family, qualifier = _parse_column(m.column)
                    table.delete(row, family, qualifier, _now_ms() if ts is None else ts)

        def puts() -> None:
            put_ts = _now_ms() if ts is None else ts
            for m in mutations:
                if not m.isDelete:
                    family, qualifier = _parse_column(m.column)
                    if qualifier is None:
                        table.check_family(family)
                        continue  # HBase ignores a put without a qualifier (only logs it)
                    table.put(row, family, qualifier, put_ts, m.value or b"")

        for m in mutations:
            table.check_family(_parse_column(m.column)[0])
        if deletes_first:
            deletes()
            puts()
        else:
            puts()
            deletes()

    def _cells(self, name: bytes, row: bytes, column: bytes, before: int, versions: int) -> list[Any]:
        table = self._table(name)
        return [T.TCell(value=v, timestamp=t) for _, _, vs in table.read(row, [column], before, versions) for t, v in vs]

    def _rows(self, name: bytes, rows: list[bytes], columns: list[bytes] | None, before: int) -> list[Any]:
        table = self._table(name)
        results = [table.row_result(row, columns, before) for row in rows]
        return [r for r in results if r is not None]

    def _open(self, scanner: _Scanner) -> int:
        self._table(scanner.table)
        sid = self.next_scanner
        self.next_scanner += 1
        self.scanners[sid] = scanner
        return sid

    def _next_row(self, table: _Table, s: _Scanner) -> bytes | None:
        keys = table.keys
        if not s.reverse:
            if s.cursor is None:
                i = bisect_left(keys, s.start)
            else:
                i = bisect_right(keys, s.cursor)
            if i >= len(keys):
                return None
            key = keys[i]
            if s.stop and key >= s.stop:
                return None
        else:
            if s.cursor is not None:
                i = bisect_left(keys, s.cursor) - 1
            elif s.start:
                i = bisect_right(keys, s.start) - 1
            else:
                i = len(keys) - 1
            if i < 0:
                return None
            key = keys[i]
            if s.stop and key <= s.stop:
                return None
        if s.prefix is not None and not key.startswith(s.prefix):
            return None  # WhileMatchFilter(PrefixFilter): the scan ends at the first mismatch
        return key

    # -- tables ------------------------------------------------------------------------------

    @_api
    def getTableNames(self) -> list[bytes]:  # noqa: N802 (Thrift names)
        return sorted(self.tables)

    @_api
    def createTable(self, tableName: bytes, columnFamilies: list[Any]) -> None:  # noqa: N802, N803
        if not tableName or not _TABLE_NAME.match(tableName):
            raise T.IllegalArgument(message=f"Illegal table name: {tableName!r}")
        if tableName in self.tables:
            raise T.AlreadyExists(message="table name already in use")
        if not columnFamilies:
            raise T.IllegalArgument(message="Table should have at least one column family.")
        families = {}
        for cd in columnFamilies:
            if not cd.name:
                raise T.IllegalArgument(message="column name is empty")
            family = _parse_column(cd.name)[0]
            families[family] = T.ColumnDescriptor(
                name=family + b":",
                maxVersions=cd.maxVersions,
                compression=cd.compression,
                inMemory=cd.inMemory,
                bloomFilterType=cd.bloomFilterType,
                bloomFilterVectorSize=cd.bloomFilterVectorSize,
                bloomFilterNbHashes=cd.bloomFilterNbHashes,
                blockCacheEnabled=cd.blockCacheEnabled,
                timeToLive=cd.timeToLive,
            )
        self.tables[tableName] = _Table(tableName, families)

    @_api
    def deleteTable(self, tableName: bytes) -> None:  # noqa: N802, N803
        table = self._table(tableName, enabled=False)
        if table.enabled:
            raise T.IOError(message=f"org.apache.hadoop.hbase.TableNotDisabledException: {tableName.decode()}")
        del self.tables[tableName]

    @_api
    def enableTable(self, tableName: bytes) -> None:  # noqa: N802, N803
        table = self._table(tableName, enabled=False)
        if table.enabled:
            raise T.IOError(message=f"org.apache.hadoop.hbase.TableNotDisabledException: {tableName.decode()}")
        table.enabled = True

    @_api
    def disableTable(self, tableName: bytes) -> None:  # noqa: N802, N803
        table = self._table(tableName)
        table.enabled = False

    @_api
    def isTableEnabled(self, tableName: bytes) -> bool:  # noqa: N802, N803
        return self._table(tableName, enabled=False).enabled

    @_api
    def getColumnDescriptors(self, tableName: bytes) -> dict[bytes, Any]:  # noqa: N802, N803
        table = self._table(tableName, enabled=False)
        return {family + b":": cd for family, cd in table.families.items()}

    @_api
    def getTableRegions(self, tableName: bytes) -> list[Any]:  # noqa: N802, N803
        table = self._table(tableName, enabled=False)
        return [
            T.TRegionInfo(
                startKey=b"",
                endKey=b"",
                id=table.region_id,
                name=tableName + b",," + str(table.region_id).encode() + b".",
                version=1,
                serverName=b"127.0.0.1",
                port=self.port,
            )
        ]

    @_api
    def compact(self, tableNameOrRegionName: bytes) -> None:  # noqa: N803
        self._table(tableNameOrRegionName, enabled=False)

    @_api
    def majorCompact(self, tableNameOrRegionName: bytes) -> None:  # noqa: N802, N803
        self._table(tableNameOrRegionName, enabled=False).markers.clear()

    # -- reads -------------------------------------------------------------------------------

    @_api
    def get(self, tableName: bytes, row: bytes, column: bytes, attributes: Any = None) -> list[Any]:  # noqa: N803
        return self._cells(tableName, row, column, _MAX_TS, 1)

    @_api
    def getVer(self, tableName, row, column, numVersions, attributes=None):  # noqa: N802, N803
        return self._cells(tableName, row, column, _MAX_TS, max(1, numVersions))

    @_api
    def getVerTs(self, tableName, row, column, timestamp, numVersions, attributes=None):  # noqa: N802, N803
        return self._cells(tableName, row, column, timestamp, max(1, numVersions))

    @_api
    def getRow(self, tableName, row, attributes=None):  # noqa: N802, N803
        return self._rows(tableName, [row], None, _MAX_TS)

    @_api
    def getRowWithColumns(self, tableName, row, columns, attributes=None):  # noqa: N802, N803
        return self._rows(tableName, [row], columns, _MAX_TS)

    @_api
    def getRowTs(self, tableName, row, timestamp, attributes=None):  # noqa: N802, N803
        return self._rows(tableName, [row], None, timestamp)

    @_api
    def getRowWithColumnsTs(self, tableName, row, columns, timestamp, attributes=None):  # noqa: N802, N803
        return self._rows(tableName, [row], columns, timestamp)

    @_api
    def getRows(self, tableName, rows, attributes=None):  # noqa: N802, N803
        return self._rows(tableName, rows or [], None, _MAX_TS)

    @_api
    def getRowsWithColumns(self, tableName, rows, columns, attributes=None):  # noqa: N802, N803
        return self._rows(tableName, rows or [], columns, _MAX_TS)

    @_api
    def getRowsTs(self, tableName, rows, timestamp, attributes=None):  # noqa: N802, N803
        return self._rows(tableName, rows or [], None, timestamp)

    @_api
    def getRowsWithColumnsTs(self, tableName, rows, columns, timestamp, attributes=None):  # noqa: N802, N803
        return self._rows(tableName, rows or [], columns, timestamp)

    @_api
    def getRowOrBefore(self, tableName, row, family):  # noqa: N802, N803
        raise T.IOError(message="getRowOrBefore is not supported (removed in HBase 2)")

    @_api
    def getRegionInfo(self, row):  # noqa: N802
        raise T.IOError(message="getRegionInfo is not supported by the test stand-in")

    # -- writes ------------------------------------------------------------------------------

    @_api
    def mutateRow(self, tableName, row, mutations, attributes=None):  # noqa: N802, N803
        self._mutate(self._table(tableName), row, mutations or [], None, deletes_first=True)

    @_api
    def mutateRowTs(self, tableName, row, mutations, timestamp, attributes=None):  # noqa: N802, N803
        self._mutate(self._table(tableName), row, mutations or [], timestamp, deletes_first=True)

    @_api
    def mutateRows(self, tableName, rowBatches, attributes=None):  # noqa: N802, N803
        self._mutate_rows(tableName, rowBatches, None)

    @_api
    def mutateRowsTs(self, tableName, rowBatches, timestamp, attributes=None):  # noqa: N802, N803
        self._mutate_rows(tableName, rowBatches, timestamp)

    def _mutate_rows(self, name: bytes, batches: list[Any] | None, ts: int | None) -> None:
        table = self._table(name)
        batches = batches or []
        for b in batches:  # validate everything first: a bad family fails the whole call
            for m in b.mutations or []:
                table.check_family(_parse_column(m.column)[0])
        put_only = [(b.row, [m for m in b.mutations or [] if not m.isDelete]) for b in batches]
        delete_only = [(b.row, [m for m in b.mutations or [] if m.isDelete]) for b in batches]
        for row, ms in put_only + delete_only:  # HBase's handler sends all puts, then all deletes
            self._mutate(table, row, ms, ts, deletes_first=False)

    @_api
    def atomicIncrement(self, tableName, row, column, value):  # noqa: N802, N803
        return self._increment(self._table(tableName), row, column, value)

    def _increment(self, table: _Table, row: bytes, column: bytes, amount: int) -> int:
        family, qualifier = _parse_column(column)
        if qualifier is None:
            raise T.IllegalArgument(message="Invalid column: no qualifier")
        cells = table.read(row, [column])
        current = 0
        if cells:
            raw = cells[0][2][0][1]
            if len(raw) != 8:
                raise T.IOError(message="org.apache.hadoop.hbase.DoNotRetryIOException: Field is not a long, it's "
                                f"{len(raw)} bytes wide")
            current = _LONG.unpack(raw)[0]
        new = current + amount
        table.put(row, family, qualifier, _now_ms(), _LONG.pack(new))
        return new

    @_api
    def increment(self, increment):
        self._increment(self._table(increment.table), increment.row, increment.column, increment.ammount)

    @_api
    def incrementRows(self, increments):  # noqa: N802
        for inc in increments or []:
            self._increment(self._table(inc.table), inc.row, inc.column, inc.ammount)

    @_api
    def deleteAll(self, tableName, row, column, attributes=None):  # noqa: N802, N803
        self._delete_column(tableName, row, column, _now_ms())

    @_api
    def deleteAllTs(self, tableName, row, column, timestamp, attributes=None):  # noqa: N802, N803
        self._delete_column(tableName, row, column, timestamp)

    def _delete_column(self, name: bytes, row: bytes, column: bytes, ts: int) -> None:
        family, qualifier = _parse_column(column)
        self._table(name).delete(row, family, qualifier, ts)

    @_api
    def deleteAllRow(self, tableName, row, attributes=None):  # noqa: N802, N803
        self._table(tableName).delete_row(row, _now_ms())

    @_api
    def deleteAllRowTs(self, tableName, row, timestamp, attributes=None):  # noqa: N802, N803
        self._table(tableName).delete_row(row, timestamp)

    @_api
    def append(self, append):
        raise T.IOError(message="append is not supported by the test stand-in")

    @_api
    def checkAndPut(self, tableName, row, column, value, mput, attributes=None):  # noqa: N802, N803
        raise T.IOError(message="checkAndPut is not supported by the test stand-in")

    # -- scanners ----------------------------------------------------------------------------

    @_api
    def scannerOpenWithScan(self, tableName, scan, attributes=None):  # noqa: N802, N803
        if scan.filterString:
            raise T.IOError(message=f"filters not supported by the test stand-in: {scan.filterString!r}")
        if scan.batchSize is not None and scan.batchSize < 1:
            raise T.IOError(message="batchSize must be >= 1")
        return self._open(
            _Scanner(
                table=tableName,
                start=scan.startRow or b"",
                stop=scan.stopRow,
                prefix=None,
                columns=scan.columns,
                before=_MAX_TS if scan.timestamp is None else scan.timestamp,
                batch=scan.batchSize,
                sort_columns=bool(scan.sortColumns),
                reverse=bool(scan.reversed),
            )
        )

    def _simple_scanner(self, name, start, stop, columns, before=_MAX_TS, prefix=None) -> int:
        return self._open(_Scanner(name, start or b"", stop, prefix, columns, before, None, False, False))

    @_api
    def scannerOpen(self, tableName, startRow, columns, attributes=None):  # noqa: N802, N803
        return self._simple_scanner(tableName, startRow, None, columns)

    @_api
    def scannerOpenWithStop(self, tableName, startRow, stopRow, columns, attributes=None):  # noqa: N802, N803
        return self._simple_scanner(tableName, startRow, stopRow, columns)

    @_api
    def scannerOpenWithPrefix(self, tableName, startAndPrefix, columns, attributes=None):  # noqa: N802, N803
        return self._simple_scanner(tableName, startAndPrefix, None, columns, prefix=startAndPrefix or b"")

    @_api
    def scannerOpenTs(self, tableName, startRow, columns, timestamp, attributes=None):  # noqa: N802, N803
        return self._simple_scanner(tableName, startRow, None, columns, timestamp)

    @_api
    def scannerOpenWithStopTs(self, tableName, startRow, stopRow, columns, timestamp, attributes=None):  # noqa: N802, N803
        return self._simple_scanner(tableName, startRow, stopRow, columns, timestamp)

    @_api
    def scannerGetList(self, id, nbRows):  # noqa: N802, A002
        scanner = self.scanners.get(id)
        if scanner is None:
            raise T.IllegalArgument(message="scanner ID is invalid")
        table = self._table(scanner.table)
        out: list[Any] = []
        while len(out) < nbRows:
            if scanner.pending:
                out.append(scanner.pending.pop(0))
                continue
            key = self._next_row(table, scanner)
            if key is None:
                break
            scanner.cursor = key
            cells = table.read(key, scanner.columns, scanner.before)
            if not cells:
                continue
            step = scanner.batch or len(cells)
            scanner.pending = [
                _row_result(key, cells[i : i + step], scanner.sort_columns) for i in range(0, len(cells), step)
            ]
        return out

    @_api
    def scannerGet(self, id):  # noqa: N802, A002
        return self.scannerGetList(id, 1)

    @_api
    def scannerClose(self, id):  # noqa: N802, A002
        if self.scanners.pop(id, None) is None:
            raise T.IllegalArgument(message="scanner ID is invalid")


_TRANSPORTS = {"buffered": TBufferedTransportFactory, "framed": TFramedTransportFactory}
_PROTOCOLS = {"binary": TBinaryProtocolFactory, "compact": TCompactProtocolFactory}


class HBaseStandIn:
    """A running stand-in server: `host`, `port`, the `handler` (its state) and `stop()`."""

    def __init__(self, transport: str = "buffered", protocol: str = "binary", host: str = "127.0.0.1") -> None:
        self.host = host
        self.handler = HBaseHandler()
        # make_server wants a non-zero port; bind port 0 ourselves to get a free one without a race
        self._server = make_server(
            HBASE_THRIFT.Hbase,
            self.handler,
            host,
            1,
            proto_factory=_PROTOCOLS[protocol](),
            trans_factory=_TRANSPORTS[transport](),
            client_timeout=None,
        )
        self._server.trans.port = 0
        self._server.trans.listen()
        self.port: int = self._server.trans.sock.getsockname()[1]
        self.handler.port = self.port
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"hbase-stand-in-{self.port}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        trans = self._server.trans
        while not self._closed.is_set():
            try:
                client = trans.accept()
            except (OSError, AttributeError, AssertionError):
                return  # the listening socket was closed by stop()
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: Any) -> None:
        try:
            self._server.handle(client)
        except TTransportException:
            pass

    def stop(self) -> None:
        """Stop accepting connections (open client connections die with their threads)."""
        self._closed.set()
        sock = self._server.trans.sock
        self._server.trans.close()
        if sock is not None:
            try:  # wake accept() on platforms where close() alone does not
                socket.create_connection((self.host, self.port), timeout=0.2).close()
            except OSError:
                pass
        self._thread.join(timeout=5)


@contextmanager
def hbase_server(transport: str = "buffered", protocol: str = "binary") -> Iterator[tuple[str, int]]:
    """Run a stand-in HBase Thrift1 server on 127.0.0.1 (free port); yield (host, port)."""
    server = HBaseStandIn(transport=transport, protocol=protocol)
    try:
        yield server.host, server.port
    finally:
        server.stop()
