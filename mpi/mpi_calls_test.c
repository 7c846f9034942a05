/* An MPI program that checks the collectives libtessera_mpi.so routes and the cases it
 * leaves to Open MPI, against values computed here. It knows nothing of tessera: built
 * against mpi.h and libmpi only, it runs alike with and without the library preloaded
 * (mpi/mpi_programs_test.sh runs it both ways on 2, 3 and 4 ranks, and on emulated
 * hosts).
 *
 *   mpirun -np 4 [-x LD_PRELOAD=bazel-bin/mpi/libtessera_mpi.so] mpi_calls_test
 *   mpirun -np 2 -x LD_PRELOAD=... -x TESSERA_TIMEOUT_MS=2000 mpi_calls_test --late-rank
 *   mpirun -np 2 -x LD_PRELOAD=... mpi_calls_test --thread-multiple
 *
 * Every rank prints "FAIL: ..." for each wrong value; rank 0 ends with
 * "mpi_calls: N passed, M failed" over all ranks, and every rank exits 1 if M > 0.
 * --late-rank: rank 1 joins an allreduce 3 s late, on a communicator that returns errors;
 * rank 0 prints what its call returned ("late-rank: rank 0: ...").
 * --thread-multiple: MPI_Init_thread(MPI_THREAD_MULTIPLE) in place of MPI_Init (the
 * library routes non-blocking collectives only then); the checks are the same.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank, g_size;

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static long g_passed, g_failed;

#define CHECK(cond, ...)                          \
  do {                                            \
    if (cond) {                                   \
      ++g_passed;                                 \
    } else {                                      \
      ++g_failed;                                 \
      printf("FAIL: rank %d: ", g_rank);          \
      printf(__VA_ARGS__);                        \
      printf(" (%s:%d)\n", __FILE__, __LINE__);   \
    }                                             \
  } while (0)

static void CheckOk(int rc, const char* what) { CHECK(rc == MPI_SUCCESS, "%s returned %d", what, rc); }

/* Rank r's value at index i: small integers, exact in every type and under every op. */
static int ValueOf(int r, long i) { return (int)((r + 1 + i) % 5) + 1; }

static int Expected(const char* op, int nranks, long i) {
  int acc = ValueOf(0, i);
  for (int r = 1; r < nranks; ++r) {
    const int v = ValueOf(r, i);
    if (!strcmp(op, "sum")) acc += v;
    if (!strcmp(op, "prod")) acc *= v;
    if (!strcmp(op, "max")) acc = v > acc ? v : acc;
    if (!strcmp(op, "min")) acc = v < acc ? v : acc;
  }
  return acc;
}

static MPI_Op OpNamed(const char* op) {
  if (!strcmp(op, "sum")) return MPI_SUM;
  if (!strcmp(op, "prod")) return MPI_PROD;
  if (!strcmp(op, "max")) return MPI_MAX;
  return MPI_MIN;
}

/* Allreduce, reduce and reduce_scatter_block over doubles and ints, every op, in place
 * and not, on `comm`. */
static void CheckReductions(MPI_Comm comm, const char* name) {
  static const char* ops[] = {"sum", "prod", "max", "min"};
  static const int counts[] = {0, 1, 7, 1000, 70000};
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  for (int o = 0; o < 4; ++o) {
    /* prod of 4 ranks of values up to 5 stays exact; more ranks only for the rest */
    if (!strcmp(ops[o], "prod") && size > 6) continue;
    for (int c = 0; c < 5; ++c) {
      const int n = counts[c];
      double* d = malloc(sizeof(double) * (n + 1));
      int* in = malloc(sizeof(int) * (n + 1));
      int* out = malloc(sizeof(int) * ((size_t)n * size + 1));
      for (int i = 0; i < n; ++i) d[i] = ValueOf(rank, i), in[i] = ValueOf(rank, i);
      CheckOk(MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_DOUBLE, OpNamed(ops[o]), comm), "MPI_Allreduce");
      CheckOk(MPI_Allreduce(in, out, n, MPI_INT, OpNamed(ops[o]), comm), "MPI_Allreduce");
      long bad = 0;
      for (int i = 0; i < n; ++i) bad += d[i] != Expected(ops[o], size, i) || out[i] != Expected(ops[o], size, i);
      CHECK(bad == 0, "%s allreduce %s of %d: %ld wrong", name, ops[o], n, bad);
      const int root = (c + o) % size;
      for (int i = 0; i < n; ++i) d[i] = ValueOf(rank, i);
      CheckOk(MPI_Reduce(rank == root ? MPI_IN_PLACE : d, rank == root ? d : NULL, n, MPI_DOUBLE, OpNamed(ops[o]), root,
                         comm),
              "MPI_Reduce");
      bad = 0;
      for (int i = 0; rank == root && i < n; ++i) bad += d[i] != Expected(ops[o], size, i);
      CHECK(bad == 0, "%s reduce %s of %d to root %d: %ld wrong", name, ops[o], n, root, bad);
      free(d);
      free(in);
      free(out);
    }
    /* reduce_scatter_block of 3 ints a rank, out of place and in place (the rest of the
       in-place buffer keeps its input) */
    int send[64], recv[64];
    for (int i = 0; i < 3 * size; ++i) send[i] = ValueOf(rank, i), recv[i] = -1;
    CheckOk(MPI_Reduce_scatter_block(send, recv, 3, MPI_INT, OpNamed(ops[o]), comm), "MPI_Reduce_scatter_block");
    long bad = 0;
    for (int i = 0; i < 3; ++i) bad += recv[i] != Expected(ops[o], size, 3 * rank + i);
    CheckOk(MPI_Reduce_scatter_block(MPI_IN_PLACE, send, 3, MPI_INT, OpNamed(ops[o]), comm), "MPI_Reduce_scatter_block");
    for (int i = 0; i < 3 * size; ++i) bad += send[i] != (i < 3 ? Expected(ops[o], size, 3 * rank + i) : ValueOf(rank, i));
    CHECK(bad == 0, "%s reduce_scatter_block %s: %ld wrong", name, ops[o], bad);
  }
}

/* Bcast, allgather and alltoall of ints, in place where MPI allows, and a barrier. */
static void CheckMovement(MPI_Comm comm, const char* name) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  enum { kMax = 3000 };
  static int buf[kMax * 16], out[kMax * 16];
  const int counts[] = {1, 5, kMax};
  for (int c = 0; c < 3; ++c) {
    const int n = counts[c];
    for (int root = 0; root < size; ++root) {
      for (int i = 0; i < n; ++i) buf[i] = rank == root ? ValueOf(root, i) : -1;
      CheckOk(MPI_Bcast(buf, n, MPI_INT, root, comm), "MPI_Bcast");
      long bad = 0;
      for (int i = 0; i < n; ++i) bad += buf[i] != ValueOf(root, i);
      CHECK(bad == 0, "%s bcast of %d from %d: %ld wrong", name, n, root, bad);
    }
    for (int i = 0; i < n; ++i) buf[i] = ValueOf(rank, i);
    CheckOk(MPI_Allgather(buf, n, MPI_INT, out, n, MPI_INT, comm), "MPI_Allgather");
    long bad = 0;
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < n; ++i) bad += out[r * n + i] != ValueOf(r, i);
    for (int i = 0; i < n * size; ++i) out[i] = i / n == rank ? ValueOf(rank, i % n) : -1;
    CheckOk(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, n, MPI_INT, comm), "MPI_Allgather");
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < n; ++i) bad += out[r * n + i] != ValueOf(r, i);
    CHECK(bad == 0, "%s allgather of %d: %ld wrong", name, n, bad);
    /* alltoall: block j of rank r holds 1000 r + j */
    for (int j = 0; j < size; ++j)
      for (int i = 0; i < n; ++i) buf[j * n + i] = 1000 * rank + j + i;
    CheckOk(MPI_Alltoall(buf, n, MPI_INT, out, n, MPI_INT, comm), "MPI_Alltoall");
    CheckOk(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, n, MPI_INT, comm), "MPI_Alltoall");
    bad = 0;
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < n; ++i) bad += out[r * n + i] != 1000 * r + rank + i || buf[r * n + i] != 1000 * r + rank + i;
    CHECK(bad == 0, "%s alltoall of %d: %ld wrong", name, n, bad);
  }
  /* A barrier holds every rank until the last arrives (rank r arrives 20 r ms late): no
     rank leaves before the last arrival (CLOCK_MONOTONIC: the ranks share a machine, and
     Open MPI's MPI_Wtime counts from each process's MPI_Init). */
  CheckOk(MPI_Barrier(comm), "MPI_Barrier");
  usleep(20000 * rank);
  const double arrived = Now();
  CheckOk(MPI_Barrier(comm), "MPI_Barrier");
  const double left = Now();
  double last_arrival = 0;
  MPI_Allreduce(&arrived, &last_arrival, 1, MPI_DOUBLE, MPI_MAX, comm);
  CHECK(left >= last_arrival, "%s barrier: left %.6f s before the last rank arrived", name, last_arrival - left);
}

/* The non-blocking collectives, all in flight at once beside a blocking allreduce, then
 * waited for together; an allreduce on a dup freed once it is done (freeing it before
 * the wait, as MPI allows, crashes Open MPI 4.1's own libnbc). */
static void CheckNonBlocking(MPI_Comm comm, const char* name) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  enum { kN = 1000 };
  static double sum[kN], red[kN];
  static int bc[kN], gathered[16], rsb_in[3 * 16], rsb_out[3], a2a_in[16], a2a_out[16];
  for (int i = 0; i < kN; ++i) sum[i] = red[i] = ValueOf(rank, i), bc[i] = rank == 0 ? ValueOf(0, i) : -1;
  for (int i = 0; i < 3 * size; ++i) rsb_in[i] = ValueOf(rank, i);
  for (int j = 0; j < size; ++j) a2a_in[j] = 1000 * rank + j;
  const int root = size - 1;
  MPI_Request requests[7];
  CheckOk(MPI_Iallreduce(MPI_IN_PLACE, sum, kN, MPI_DOUBLE, MPI_SUM, comm, &requests[0]), "MPI_Iallreduce");
  CheckOk(MPI_Ibcast(bc, kN, MPI_INT, 0, comm, &requests[1]), "MPI_Ibcast");
  const int mine = 100 + rank;
  CheckOk(MPI_Iallgather(&mine, 1, MPI_INT, gathered, 1, MPI_INT, comm, &requests[2]), "MPI_Iallgather");
  CheckOk(MPI_Ireduce_scatter_block(rsb_in, rsb_out, 3, MPI_INT, MPI_MAX, comm, &requests[3]),
          "MPI_Ireduce_scatter_block");
  CheckOk(MPI_Ialltoall(a2a_in, 1, MPI_INT, a2a_out, 1, MPI_INT, comm, &requests[4]), "MPI_Ialltoall");
  CheckOk(MPI_Ireduce(rank == root ? MPI_IN_PLACE : red, rank == root ? red : NULL, kN, MPI_DOUBLE, MPI_MIN, root, comm,
                      &requests[5]),
          "MPI_Ireduce");
  CheckOk(MPI_Ibarrier(comm, &requests[6]), "MPI_Ibarrier");
  int blocking = rank, most = -1;
  CheckOk(MPI_Allreduce(&blocking, &most, 1, MPI_INT, MPI_MAX, comm), "MPI_Allreduce");
  CheckOk(MPI_Waitall(7, requests, MPI_STATUSES_IGNORE), "MPI_Waitall");
  long bad = most != size - 1;
  for (int i = 0; i < kN; ++i) bad += sum[i] != Expected("sum", size, i) || bc[i] != ValueOf(0, i);
  for (int i = 0; rank == root && i < kN; ++i) bad += red[i] != Expected("min", size, i);
  for (int i = 0; i < 3; ++i) bad += rsb_out[i] != Expected("max", size, 3 * rank + i);
  for (int r = 0; r < size; ++r) bad += a2a_out[r] != 1000 * r + rank || gathered[r] != 100 + r;
  CHECK(bad == 0, "%s non-blocking collectives: %ld wrong", name, bad);
  MPI_Comm dup;
  MPI_Comm_dup(comm, &dup);
  static double big[1 << 18];
  for (int i = 0; i < (1 << 18); ++i) big[i] = ValueOf(rank, i);
  MPI_Request request;
  CheckOk(MPI_Iallreduce(MPI_IN_PLACE, big, 1 << 18, MPI_DOUBLE, MPI_MAX, dup, &request), "MPI_Iallreduce");
  CheckOk(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
  MPI_Comm_free(&dup);
  bad = 0;
  for (int i = 0; i < (1 << 18); ++i) bad += big[i] != Expected("max", size, i);
  CHECK(bad == 0, "%s non-blocking allreduce on a dup: %ld wrong", name, bad);
}

/* Data movement with derived datatypes that differ between ranks of one signature: the
 * root sends every other int (a vector), the others receive plain ints; a type whose
 * blocks are listed backwards must be read in its type-map order. */
static void CheckDerivedMovement(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  enum { kN = 100 };
  int wide[2 * kN], flat[kN];
  MPI_Datatype every_other, backwards;
  MPI_Type_vector(kN, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  int lengths[2] = {1, 1}, displacements[2] = {1, 0};
  MPI_Type_indexed(2, lengths, displacements, MPI_INT, &backwards);
  MPI_Type_commit(&backwards);
  const int root = size - 1;
  for (int i = 0; i < 2 * kN; ++i) wide[i] = i % 2 ? -7 : ValueOf(root, i / 2);
  for (int i = 0; i < kN; ++i) flat[i] = -1;
  if (rank == root) {
    CheckOk(MPI_Bcast(wide, 1, every_other, root, comm), "MPI_Bcast (vector)");
  } else {
    CheckOk(MPI_Bcast(flat, kN, MPI_INT, root, comm), "MPI_Bcast (ints)");
  }
  long bad = 0;
  for (int i = 0; rank != root && i < kN; ++i) bad += flat[i] != ValueOf(root, i);
  CHECK(bad == 0, "bcast of a vector type into ints: %ld wrong", bad);
  /* allgather: each rank sends 2 ints as one `backwards` element (so its 2nd int first) */
  int pair[2] = {10 * rank, 10 * rank + 1}, all[64];
  CheckOk(MPI_Allgather(pair, 1, backwards, all, 2, MPI_INT, comm), "MPI_Allgather (indexed)");
  bad = 0;
  for (int r = 0; r < size; ++r) bad += all[2 * r] != 10 * r + 1 || all[2 * r + 1] != 10 * r;
  CHECK(bad == 0, "allgather of an indexed type: %ld wrong", bad);
  MPI_Type_free(&every_other);
  MPI_Type_free(&backwards);
}

/* Non-commutative: 2x2 integer matrices multiplied in rank order. */
static void MatrixProduct(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  int* a = in;
  int* b = inout;
  for (int k = 0; k < *len; ++k, a += 4, b += 4) {
    int c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                a[2] * b[1] + a[3] * b[3]};
    memcpy(b, c, sizeof(c));
  }
}

/* What the library leaves to Open MPI: a user operator (not commutative), MPI_MAXLOC on
 * pairs, MPI_SHORT, MPI_BYTE with MPI_BOR, a derived type, MPI_LAND, MPI_COMM_SELF and
 * an intercommunicator. Each must still be right. */
static void CheckFallbacks(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Datatype matrix;
  MPI_Type_contiguous(4, MPI_INT, &matrix);
  MPI_Type_commit(&matrix);
  MPI_Op product;
  MPI_Op_create(MatrixProduct, 0, &product);
  int m[4] = {1, rank + 1, 0, 1}, r[4];  /* [[1, k], [0, 1]]: the product adds the k's */
  CheckOk(MPI_Allreduce(m, r, 1, matrix, product, comm), "MPI_Allreduce (user op)");
  CHECK(r[0] == 1 && r[1] == size * (size + 1) / 2 && r[2] == 0 && r[3] == 1, "user op: [[%d, %d], [%d, %d]]", r[0],
        r[1], r[2], r[3]);
  struct {
    float value;
    int index;
  } loc = {(float)rank, rank}, best;
  CheckOk(MPI_Allreduce(&loc, &best, 1, MPI_FLOAT_INT, MPI_MAXLOC, comm), "MPI_Allreduce (MAXLOC)");
  CHECK(best.value == (float)(size - 1) && best.index == size - 1, "maxloc %f at %d", best.value, best.index);
  short s = (short)(rank + 1), s_sum = 0;
  CheckOk(MPI_Allreduce(&s, &s_sum, 1, MPI_SHORT, MPI_SUM, comm), "MPI_Allreduce (short)");
  CHECK(s_sum == size * (size + 1) / 2, "short sum %d", s_sum);
  unsigned char bits = (unsigned char)(1u << (rank % 8)), any = 0;
  CheckOk(MPI_Allreduce(&bits, &any, 1, MPI_BYTE, MPI_BOR, comm), "MPI_Allreduce (byte bor)");
  CHECK(any == (unsigned char)((1u << (size < 8 ? size : 8)) - 1), "byte bor 0x%x", any);
  int truth = rank != 0, all_true = -1;
  CheckOk(MPI_Allreduce(&truth, &all_true, 1, MPI_INT, MPI_LAND, comm), "MPI_Allreduce (land)");
  CHECK(all_true == 0, "land %d", all_true);
  int self_in = 5, self_out = 0;
  CheckOk(MPI_Allreduce(&self_in, &self_out, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF), "MPI_Allreduce (self)");
  CHECK(self_out == 5, "self %d", self_out);
  if (size >= 2) {
    /* even ranks and odd ranks, joined by an intercommunicator */
    MPI_Comm half, inter;
    MPI_Comm_split(comm, rank % 2, rank, &half);
    MPI_Intercomm_create(half, 0, comm, rank % 2 ? 0 : 1, 77, &inter);
    int mine = rank, remote_sum = -1, remote_size = 0;
    MPI_Comm_remote_size(inter, &remote_size);
    CheckOk(MPI_Allreduce(&mine, &remote_sum, 1, MPI_INT, MPI_SUM, inter), "MPI_Allreduce (intercomm)");
    int expect = 0;
    for (int q = 0; q < size; ++q) expect += q % 2 != rank % 2 ? q : 0;
    CHECK(remote_sum == expect, "intercomm allreduce %d, want %d", remote_sum, expect);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }
  MPI_Op_free(&product);
  MPI_Type_free(&matrix);
}

/* Communicators made by dup, split and create, freed and made again. */
static void CheckCommunicators(void) {
  for (int round = 0; round < 3; ++round) {
    MPI_Comm dup, split, first_half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    CheckReductions(dup, "dup");
    MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, -g_rank, &split); /* reversed order */
    CheckReductions(split, "split");
    CheckMovement(split, "split");
    MPI_Group world, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int range[1][3] = {{0, (g_size + 1) / 2 - 1, 1}};
    MPI_Group_range_incl(world, 1, range, &group);
    MPI_Comm_create(MPI_COMM_WORLD, group, &first_half);
    if (first_half != MPI_COMM_NULL) {
      CheckReductions(first_half, "create");
      MPI_Comm_free(&first_half);
    }
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
  }
}

/* Errors come back through the communicator's error handler: with MPI_ERRORS_RETURN a
 * root out of range is an error code, on every rank, at once. */
static void CheckErrors(void) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  double x = 1, y = 0;
  const int rc = MPI_Reduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, g_size, comm);
  char text[MPI_MAX_ERROR_STRING] = "";
  int length = 0;
  MPI_Error_string(rc, text, &length);
  CHECK(rc != MPI_SUCCESS, "MPI_Reduce to root %d returned success", g_size);
  if (g_rank == 0) printf("errors: MPI_Reduce to root %d: %s\n", g_size, text);
  CheckOk(MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce after a refused call");
  CHECK(y == g_size, "allreduce after a refused call: %f", y);
  MPI_Comm_free(&comm);
}

/* Rank 1 joins an allreduce 3 s late: with tessera (TESSERA_TIMEOUT_MS=2000) rank 0's
 * call returns an error naming rank 1 through MPI_ERRORS_RETURN; Open MPI just waits. */
static void LateRank(void) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  double x = 1, y = 0;
  CheckOk(MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce before");
  if (g_rank == 1) sleep(3);
  const int rc = MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, comm);
  char text[MPI_MAX_ERROR_STRING] = "";
  int length = 0;
  MPI_Error_string(rc, text, &length);
  printf("late-rank: rank %d: %s: %s\n", g_rank, rc == MPI_SUCCESS ? "success" : "error", text);
  fflush(stdout);
  MPI_Comm_free(&comm);
}

int main(int argc, char** argv) {
  if (argc > 1 && !strcmp(argv[1], "--thread-multiple")) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (argc > 1 && !strcmp(argv[1], "--late-rank")) {
    LateRank();
  } else {
    CheckReductions(MPI_COMM_WORLD, "world");
    CheckMovement(MPI_COMM_WORLD, "world");
    CheckNonBlocking(MPI_COMM_WORLD, "world");
    CheckDerivedMovement(MPI_COMM_WORLD);
    CheckFallbacks(MPI_COMM_WORLD);
    CheckCommunicators();
    CheckErrors();
  }
  long counts[2] = {g_passed, g_failed}, total[2] = {0, 0};
  PMPI_Allreduce(counts, total, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("mpi_calls: %ld passed, %ld failed\n", total[0], total[1]);
  fflush(stdout);
  MPI_Finalize();
  return total[1] == 0 ? 0 : 1;
}
