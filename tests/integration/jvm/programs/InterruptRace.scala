// The race of Spark's DirectByteBufferOutputStream with Thread.interrupt(), as a Python runner's task meets it
// (docs/spark-python-task-kill.md): a task thread writes a 40 MB "batch" into the stream through
// Channels.newChannel, as Spark's Arrow input writes a batch; another thread interrupts it mid-write, as a
// cancelled job's kill does. Prints "round N" after each interrupt survived; a crash ends the JVM (SIGSEGV).
// In Spark's package: the stream is private[spark].
package org.apache.spark.eosetl

import java.io.DataOutputStream
import java.nio.ByteBuffer
import java.nio.channels.Channels

import org.apache.spark.util.DirectByteBufferOutputStream

object InterruptRace {
  def main(args: Array[String]): Unit = {
    val rounds = args(0).toInt
    val random = new scala.util.Random(args(1).toLong)
    // 40 MB: the stream grows to 64 MB, past glibc's largest mmap threshold, so a free unmaps it at once.
    val batch = ByteBuffer.allocateDirect(40 << 20)
    // Spark's logging is set up here, not under the first interrupt (an interrupted set-up fails otherwise).
    new DirectByteBufferOutputStream(64).write(new Array[Byte](128), 0, 128)
    for (r <- 0 until rounds) {
      val stream = new DirectByteBufferOutputStream()
      @volatile var started = false
      val task = new Thread(() => {
        try {
          while (true) {
            stream.reset()
            val channel = Channels.newChannel(new DataOutputStream(stream))
            started = true
            channel.write(batch.duplicate())
          }
        } catch {
          case _: Throwable => // ClosedByInterruptException, or the closed stream's own error: the task's end
        }
      })
      task.start()
      while (!started) Thread.onSpinWait()
      Thread.sleep(random.nextInt(10).toLong)
      task.interrupt()
      task.join()
      println(s"round $r")
    }
  }
}
