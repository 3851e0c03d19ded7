package ferrymq.compat;

import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs one mqadmin command (MQAdminStartup.main) and exits as soon as the command has finished its
 * work and starts shutting its admin client down.
 *
 * Why: the client's shutdown waits up to 3 s for an idle event thread to notice it should stop (it
 * polls its queue with a 3 s timeout), which adds about 3 s to every mqadmin run. Nothing is printed
 * after that point, so leaving then changes only the wall time. The command runs on a worker thread;
 * this thread watches the worker's stack for the admin's shutdown call.
 */
public final class QuickMqAdmin {
    private QuickMqAdmin() {
    }

    public static void main(String[] args) throws Exception {
        Thread worker = new Thread(() -> MQAdminStartup.main(args), "mqadmin");
        worker.start();
        while (worker.isAlive()) {
            worker.join(20);
            if (shuttingDown(worker.getStackTrace())) {
                System.out.flush();
                System.err.flush();
                Runtime.getRuntime().halt(0);
            }
        }
        System.out.flush();
        System.exit(0);
    }

    private static boolean shuttingDown(StackTraceElement[] stack) {
        for (StackTraceElement frame : stack) {
            if ("shutdown".equals(frame.getMethodName())
                && frame.getClassName().startsWith("org.apache.rocketmq.tools.admin.DefaultMQAdminExt")) {
                return true;
            }
        }
        return false;
    }
}
